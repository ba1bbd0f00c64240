//! Reading a file someone else may have put there (a key, a lock, a token, an artifact)
//! without trusting it to end: [`read`] and [`read_to_string`] take only a regular file, and
//! only up to a limit the caller gives. A device (`/dev/zero`), a FIFO or a socket is refused
//! before anything is read (it is opened without blocking, so a FIFO with no writer does not
//! hang the open), and a file longer than the limit is refused after at most `max + 1` bytes
//! have been read, whatever it says its size is. Every toolchain read of such a file goes
//! through here, so the rules are in one place; the limits are the callers', kept beside
//! their reads.

use std::fs::{File, FileType};
use std::io::{self, Read};
use std::path::Path;

/// Opens `path` for reading, refusing anything but a regular file (after following links,
/// as any open does). The open does not block (`O_NONBLOCK`, so a FIFO without a writer
/// opens at once and is then refused) and the file is not inherited by child processes
/// (`O_CLOEXEC`).
pub fn open(path: &Path) -> io::Result<File> {
    let mut options = std::fs::OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.custom_flags(libc::O_NONBLOCK | libc::O_CLOEXEC);
    }
    let file = options.open(path)?;
    let kind = file.metadata()?.file_type();
    if !kind.is_file() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "{} is {}, not a regular file",
                path.display(),
                describe(kind)
            ),
        ));
    }
    Ok(file)
}

/// What a file that is not a regular file is, in words.
fn describe(kind: FileType) -> &'static str {
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if kind.is_char_device() {
            return "a character device";
        }
        if kind.is_block_device() {
            return "a block device";
        }
        if kind.is_fifo() {
            return "a FIFO";
        }
        if kind.is_socket() {
            return "a socket";
        }
    }
    if kind.is_dir() {
        "a directory"
    } else {
        "not a regular file"
    }
}

/// The error of a file longer than `max` bytes.
fn too_long(path: &Path, max: u64) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!(
            "{} is larger than {max} bytes, the most this file may hold",
            path.display()
        ),
    )
}

/// Reads what is left of `reader` (the file at `path`, named in errors), at most `max`
/// bytes: past that it stops, having read `max + 1`, with an error naming the file and the
/// limit.
pub fn read_from(reader: impl Read, max: u64, path: &Path) -> io::Result<Vec<u8>> {
    fill(reader, max, path, Vec::new())
}

/// [`read_from`] into `bytes` (empty, perhaps with room reserved).
fn fill(reader: impl Read, max: u64, path: &Path, mut bytes: Vec<u8>) -> io::Result<Vec<u8>> {
    reader.take(max.saturating_add(1)).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > max {
        return Err(too_long(path, max));
    }
    Ok(bytes)
}

/// The bytes of the regular file at `path`, which must hold at most `max` of them (see the
/// [module](self) for what is refused).
pub fn read(path: &Path, max: u64) -> io::Result<Vec<u8>> {
    let file = open(path)?;
    // What the file says its size is serves only to refuse early and to size the buffer:
    // the bound is on what is read.
    let size = file.metadata()?.len();
    if size > max {
        return Err(too_long(path, max));
    }
    let room = usize::try_from(size).unwrap_or(0);
    fill(file, max, path, Vec::with_capacity(room))
}

/// The text of the regular file at `path`, which must hold at most `max` bytes of UTF-8.
pub fn read_to_string(path: &Path, max: u64) -> io::Result<String> {
    String::from_utf8(read(path, max)?).map_err(|_| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("{} is not UTF-8 text", path.display()),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;
    use std::time::{Duration, Instant};

    /// A fresh directory for one test.
    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("bounded-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("scratch dir");
        dir
    }

    #[test]
    fn a_file_within_the_limit_is_read_whole() {
        let dir = scratch("within");
        let file = dir.join("k");
        std::fs::write(&file, "hello").expect("write");
        assert_eq!(read(&file, 5).expect("read"), b"hello");
        assert_eq!(read_to_string(&file, 100).expect("read"), "hello");
        std::fs::write(&file, "").expect("write");
        assert_eq!(read(&file, 0).expect("read"), b"");
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn a_file_past_the_limit_is_refused_naming_it_and_the_limit() {
        let dir = scratch("past");
        let file = dir.join("big");
        std::fs::write(&file, "123456").expect("write");
        let e = read(&file, 5).expect_err("refused");
        assert_eq!(e.kind(), io::ErrorKind::InvalidData);
        let message = e.to_string();
        assert!(message.contains(&file.display().to_string()), "{message}");
        assert!(message.contains("5 bytes"), "{message}");
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn a_reader_is_read_no_further_than_one_byte_past_the_limit() {
        let mut endless = io::repeat(7);
        let e = read_from(&mut endless, 1000, Path::new("endless")).expect_err("refused");
        assert!(e.to_string().contains("1000 bytes"), "{e}");
        // The limit counts what is read, not what the file says.
        let mut reader = io::Cursor::new(vec![1u8; 10]);
        assert!(read_from(&mut reader, 9, Path::new("ten")).is_err());
        assert_eq!(reader.position(), 10);
        let mut reader = io::Cursor::new(vec![1u8; 10]);
        assert_eq!(
            read_from(&mut reader, 10, Path::new("ten"))
                .expect("read")
                .len(),
            10
        );
    }

    #[test]
    fn text_that_is_not_utf8_is_refused() {
        let dir = scratch("utf8");
        let file = dir.join("bin");
        std::fs::write(&file, [0xff, 0xfe]).expect("write");
        let e = read_to_string(&file, 10).expect_err("refused");
        assert!(e.to_string().contains("not UTF-8"), "{e}");
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn a_missing_file_is_the_system_error() {
        let e = read(Path::new("/nonexistent/bounded/file"), 10).expect_err("missing");
        assert_eq!(e.kind(), io::ErrorKind::NotFound);
    }

    #[test]
    fn a_directory_is_refused() {
        let dir = scratch("dir");
        let e = read(&dir, 10).expect_err("refused");
        assert!(e.to_string().contains("is a directory"), "{e}");
        let _ = std::fs::remove_dir_all(dir);
    }

    #[cfg(unix)]
    #[test]
    fn a_device_is_refused_without_reading() {
        let e = read(Path::new("/dev/zero"), u64::MAX).expect_err("refused");
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
        assert!(e.to_string().contains("a character device"), "{e}");
    }

    #[cfg(unix)]
    #[test]
    fn a_fifo_without_a_writer_is_refused_at_once() {
        let dir = scratch("fifo");
        let fifo = dir.join("pipe");
        let c = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).expect("path");
        // SAFETY: mkfifo(3) with a NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0, "mkfifo");
        let started = Instant::now();
        let e = read(&fifo, 10).expect_err("refused");
        assert!(e.to_string().contains("a FIFO"), "{e}");
        assert!(started.elapsed() < Duration::from_secs(5));
        let _ = std::fs::remove_dir_all(dir);
    }

    #[cfg(unix)]
    #[test]
    fn a_link_to_a_regular_file_is_read() {
        let dir = scratch("link");
        std::fs::write(dir.join("real"), "key").expect("write");
        std::os::unix::fs::symlink(dir.join("real"), dir.join("link")).expect("link");
        assert_eq!(read(&dir.join("link"), 10).expect("read"), b"key");
        let _ = std::fs::remove_dir_all(dir);
    }
}
