//! A throwaway PostgreSQL for the tests of the Postgres store: `PROSE_TEST_PG_URL` if set
//! (a server the tests may create databases on), else a cluster of Debian's PostgreSQL 15
//! binaries started once per test process: `initdb` into a temporary directory (as the
//! `postgres` user when running as root), `pg_ctl start` on a free loopback port with its
//! socket in that directory. A watcher stops the cluster and removes its directory once the
//! test process is gone. Under `CI=true` a test that cannot get a server fails; elsewhere it
//! is skipped, saying why.
//!
//! The cluster serves TLS with a certificate for 127.0.0.1 from a private CA made here with
//! openssl ([`TlsFiles`]), and the store URLs [`database`] gives connect with
//! `sslmode=verify-full` against that CA: every test of the Postgres store runs over verified
//! TLS. The role `prose_cert` may only log in with a client certificate from that CA.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;

/// Where Debian installs the PostgreSQL 15 server (another version there is used if 15 is
/// not).
const BIN: &str = "/usr/lib/postgresql/15/bin";

/// The server binaries: PostgreSQL 15's, else the newest other version Debian installed.
fn bin_dir() -> Option<PathBuf> {
    if Path::new(BIN).join("initdb").is_file() {
        return Some(PathBuf::from(BIN));
    }
    let mut found: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .ok()?
        .filter_map(|e| e.ok())
        .map(|e| e.path().join("bin"))
        .filter(|b| b.join("initdb").is_file())
        .collect();
    found.sort();
    found.pop()
}

/// A server the tests may use.
struct Server {
    /// A base URL without a database name (`postgres://user@host:port`).
    base: String,
    /// The cluster's TLS files, when it was started here.
    tls: Option<TlsFiles>,
}

/// The TLS files of a cluster started here, all PEM.
#[derive(Clone, Debug)]
pub struct TlsFiles {
    /// The private CA the server's certificate (for 127.0.0.1 only) and the client
    /// certificate come from.
    pub ca: PathBuf,
    /// Another CA, which signed neither.
    pub other_ca: PathBuf,
    /// A client certificate for the role `prose_cert`, and its key (mode 0600).
    pub client_cert: PathBuf,
    /// The client certificate's key.
    pub client_key: PathBuf,
    /// The server's port on 127.0.0.1.
    pub port: u16,
}

static SERVER: OnceLock<Result<Server, String>> = OnceLock::new();

/// A URL for a new, empty database for the test `test`, over verified TLS on a cluster
/// started here; `None` (having said why) when no server can be had off CI. Panics under
/// `CI=true` when no server can be had. A cluster started here for tests does not sync
/// (fsync off): it is thrown away.
pub fn database(test: &str) -> Option<String> {
    let url = plain_database(test, false)?;
    Some(match tls() {
        Some(tls) => format!("{url}?sslmode=verify-full&sslrootcert={}", tls.ca.display()),
        None => url,
    })
}

/// Like [`database`], in clear, on a cluster started with PostgreSQL's default durability
/// (fsync and synchronous commit on), for measurements. Whichever of the two is asked first
/// in a process decides how its cluster runs.
pub fn durable_database(test: &str) -> Option<String> {
    plain_database(test, true)
}

/// The TLS files of the cluster, when it was started here (not a `PROSE_TEST_PG_URL`
/// server). Under `CI=true` there always is one.
pub fn tls() -> Option<&'static TlsFiles> {
    let tls = SERVER.get()?.as_ref().ok()?.tls.as_ref();
    if tls.is_none() && std::env::var("CI").is_ok_and(|v| v == "true") {
        panic!(
            "the Postgres TLS tests need the cluster started here on CI (unset PROSE_TEST_PG_URL)"
        );
    }
    tls
}

fn plain_database(test: &str, durable: bool) -> Option<String> {
    let server = SERVER.get_or_init(|| server(durable));
    let base = match server {
        Ok(s) => s.base.clone(),
        Err(why) => {
            if std::env::var("CI").is_ok_and(|v| v == "true") {
                panic!("the Postgres tests need a server on CI: {why}");
            }
            eprintln!("skipping {test}: no PostgreSQL server: {why}");
            return None;
        }
    };
    let name = format!(
        "prose_{}_{}",
        test.replace(|c: char| !c.is_ascii_alphanumeric(), "_"),
        std::process::id()
    );
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async {
        let (client, conn) =
            tokio_postgres::connect(&format!("{base}/postgres"), tokio_postgres::NoTls)
                .await
                .unwrap_or_else(|e| panic!("cannot connect to {base}: {e}"));
        tokio::spawn(conn);
        // One statement each: CREATE DATABASE cannot run in a transaction block.
        for sql in [
            format!("DROP DATABASE IF EXISTS {name}"),
            format!("CREATE DATABASE {name}"),
        ] {
            client
                .batch_execute(&sql)
                .await
                .unwrap_or_else(|e| panic!("{sql}: {e:?}"));
        }
    });
    Some(format!("{base}/{name}"))
}

/// Runs `sql` on the database at `url` (as its user, in clear: the TLS parameters are left
/// out); returns the rows as text (nulls empty).
pub fn query(url: &str, sql: &str) -> Vec<Vec<String>> {
    let url = url.split('?').next().unwrap_or(url);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async {
        let (client, conn) = tokio_postgres::connect(url, tokio_postgres::NoTls)
            .await
            .expect("connects");
        tokio::spawn(conn);
        client
            .simple_query(sql)
            .await
            .unwrap_or_else(|e| panic!("{sql}: {e}"))
            .into_iter()
            .filter_map(|m| match m {
                tokio_postgres::SimpleQueryMessage::Row(r) => Some(
                    (0..r.len())
                        .map(|i| r.get(i).unwrap_or_default().to_string())
                        .collect(),
                ),
                _ => None,
            })
            .collect()
    })
}

/// The server to use: `PROSE_TEST_PG_URL`, else a cluster started here.
fn server(durable: bool) -> Result<Server, String> {
    if let Ok(url) = std::env::var("PROSE_TEST_PG_URL") {
        let url = url.trim_end_matches('/');
        // A URL naming a database: the tests' databases go beside it.
        let base = match url.rsplit_once('/') {
            Some((b, db)) if !b.ends_with('/') && !db.contains('@') => b,
            _ => url,
        };
        return Ok(Server {
            base: base.to_string(),
            tls: None,
        });
    }
    start_cluster(durable)
}

/// Runs openssl with `args` in `dir`.
fn openssl(dir: &Path, args: &[&str]) -> Result<(), String> {
    let mut c = Command::new("openssl");
    c.current_dir(dir).args(args);
    run(
        c,
        &format!("openssl {}", args.first().copied().unwrap_or("")),
    )
}

/// A CA (`{name}.crt`, `{name}.key`) in `dir`, on the P-256 curve.
fn make_ca(dir: &Path, name: &str) -> Result<(), String> {
    let (key, crt, subj) = (
        format!("{name}.key"),
        format!("{name}.crt"),
        format!("/CN=Prose test {name}"),
    );
    openssl(
        dir,
        &[
            "req",
            "-x509",
            "-new",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
            "-keyout",
            &key,
            "-out",
            &crt,
            "-days",
            "7",
            "-subj",
            &subj,
            "-addext",
            "basicConstraints=critical,CA:TRUE",
            "-addext",
            "keyUsage=critical,keyCertSign,cRLSign",
        ],
    )
}

/// A certificate `{name}.crt` (key `{name}.key`) for `subject`, with extensions `ext`,
/// signed by the CA `ca.crt` in `dir`.
fn make_cert(dir: &Path, name: &str, subject: &str, ext: &str, serial: &str) -> Result<(), String> {
    let (key, csr, crt, extfile) = (
        format!("{name}.key"),
        format!("{name}.csr"),
        format!("{name}.crt"),
        format!("{name}.ext"),
    );
    std::fs::write(dir.join(&extfile), ext).map_err(|e| format!("{extfile}: {e}"))?;
    openssl(
        dir,
        &[
            "req",
            "-new",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
            "-keyout",
            &key,
            "-out",
            &csr,
            "-subj",
            subject,
        ],
    )?;
    openssl(
        dir,
        &[
            "x509",
            "-req",
            "-in",
            &csr,
            "-CA",
            "ca.crt",
            "-CAkey",
            "ca.key",
            "-set_serial",
            serial,
            "-days",
            "7",
            "-out",
            &crt,
            "-extfile",
            &extfile,
        ],
    )
}

/// The TLS files of a cluster in `dir/tls`: a CA, another, a server certificate for
/// 127.0.0.1 and a client certificate for `prose_cert`, each key readable by its owner only
/// (the server's by `postgres`). Its port is 0 until the server has one.
fn make_tls(dir: &Path) -> Result<TlsFiles, String> {
    use std::os::unix::fs::PermissionsExt;
    let tls = dir.join("tls");
    std::fs::create_dir_all(&tls).map_err(|e| format!("{}: {e}", tls.display()))?;
    make_ca(&tls, "ca")?;
    make_ca(&tls, "other-ca")?;
    make_cert(
        &tls,
        "server",
        "/CN=127.0.0.1",
        "subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\nbasicConstraints=CA:FALSE\n",
        "1",
    )?;
    make_cert(
        &tls,
        "client",
        "/CN=prose_cert",
        "extendedKeyUsage=clientAuth\nbasicConstraints=CA:FALSE\n",
        "2",
    )?;
    for key in ["server.key", "client.key"] {
        std::fs::set_permissions(tls.join(key), std::fs::Permissions::from_mode(0o600))
            .map_err(|e| format!("{key}: {e}"))?;
    }
    if is_root() {
        let mut c = Command::new("chown");
        c.arg("-R").arg("postgres:postgres").arg(&tls);
        run(c, "chown")?;
        // The client's key stays root's, as the tests that use it run as root.
        let mut c = Command::new("chown");
        c.arg("root:root").arg(tls.join("client.key"));
        run(c, "chown")?;
    }
    Ok(TlsFiles {
        ca: tls.join("ca.crt"),
        other_ca: tls.join("other-ca.crt"),
        client_cert: tls.join("client.crt"),
        client_key: tls.join("client.key"),
        port: 0,
    })
}

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions and touches no memory.
    unsafe { libc::geteuid() == 0 }
}

/// `program` with `args`, as the `postgres` user when running as root.
fn as_postgres(program: &Path, args: &[&str]) -> Command {
    if is_root() {
        let mut c = Command::new("runuser");
        c.args(["-u", "postgres", "--"]).arg(program).args(args);
        c
    } else {
        let mut c = Command::new(program);
        c.args(args);
        c
    }
}

fn run(mut cmd: Command, what: &str) -> Result<(), String> {
    let out = cmd
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("{what}: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{what} failed ({}): {}{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ))
    }
}

fn start_cluster(durable: bool) -> Result<Server, String> {
    let Some(bin) = bin_dir() else {
        return Err(format!(
            "{BIN}/initdb not found (install postgresql-15, or set PROSE_TEST_PG_URL)"
        ));
    };
    let bin = bin.as_path();
    let dir = PathBuf::from(format!(
        "/tmp/prose-pg-{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0)
    ));
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    if is_root() {
        run(
            {
                let mut c = Command::new("chown");
                c.arg("postgres:postgres").arg(&dir);
                c
            },
            "chown",
        )?;
    }
    let data = dir.join("data");
    let data_s = data.to_string_lossy().into_owned();
    let dir_s = dir.to_string_lossy().into_owned();
    run(
        as_postgres(
            &bin.join("initdb"),
            &[
                "-D",
                &data_s,
                "-U",
                "postgres",
                "--auth=trust",
                "-E",
                "UTF8",
                "--no-sync",
            ],
        ),
        "initdb",
    )?;
    let mut tls = make_tls(&dir)?;
    // `prose_cert` logs in over TCP only with a client certificate; the rest as initdb set.
    let hba = data.join("pg_hba.conf");
    let rules = std::fs::read_to_string(&hba).map_err(|e| format!("{}: {e}", hba.display()))?;
    std::fs::write(
        &hba,
        format!("hostssl all prose_cert 127.0.0.1/32 cert\nhost all prose_cert 127.0.0.1/32 reject\n{rules}"),
    )
    .map_err(|e| format!("{}: {e}", hba.display()))?;
    let tls_dir = dir.join("tls").to_string_lossy().into_owned();
    let sync = if durable {
        ""
    } else {
        " -c fsync=off -c synchronous_commit=off -c full_page_writes=off"
    };
    let log = dir.join("server.log").to_string_lossy().into_owned();
    // A free port is found by binding port 0 and letting it go for the server to take:
    // something else may take it first. The server then fails to bind it, and another is
    // tried.
    let mut attempts = 0;
    let port = loop {
        attempts += 1;
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map_err(|e| format!("no free port: {e}"))?
            .port();
        let opts = format!(
            "-p {port} -k {dir_s} -c listen_addresses=127.0.0.1 -c max_connections=300{sync} \
             -c ssl=on -c ssl_cert_file={tls_dir}/server.crt -c ssl_key_file={tls_dir}/server.key \
             -c ssl_ca_file={tls_dir}/ca.crt"
        );
        // The log of this attempt alone, to tell a port taken from other failures.
        let _ = std::fs::remove_file(&log);
        let started = run(
            as_postgres(
                &bin.join("pg_ctl"),
                &[
                    "-D", &data_s, "-l", &log, "-o", &opts, "-w", "-t", "120", "start",
                ],
            ),
            "pg_ctl start",
        );
        let server_log = std::fs::read_to_string(&log).unwrap_or_default();
        match started {
            Ok(()) => break port,
            Err(_) if attempts < 5 && server_log.contains("could not bind") => continue,
            Err(e) => return Err(format!("{e}\n{server_log}")),
        }
    };
    tls.port = port;
    // Once this process is gone, the cluster is stopped and its directory removed.
    let pg_ctl = bin.join("pg_ctl");
    let pg_ctl = pg_ctl.display();
    let stop = if is_root() {
        format!("runuser -u postgres -- {pg_ctl} -D {data_s} -m immediate stop")
    } else {
        format!("{pg_ctl} -D {data_s} -m immediate stop")
    };
    let watcher = format!(
        "while kill -0 {pid} 2>/dev/null; do sleep 1; done; {stop} >/dev/null 2>&1; rm -rf {dir_s}",
        pid = std::process::id()
    );
    use std::os::unix::process::CommandExt;
    Command::new("sh")
        .arg("-c")
        .arg(watcher)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .process_group(0)
        .spawn()
        .map_err(|e| format!("cannot start the cluster's watcher: {e}"))?;
    let base = format!("postgres://postgres@127.0.0.1:{port}");
    run_sql(&base, "CREATE ROLE prose_cert LOGIN")?;
    Ok(Server {
        base,
        tls: Some(tls),
    })
}

/// Runs `sql` on the `postgres` database of the server at `base`.
fn run_sql(base: &str, sql: &str) -> Result<(), String> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?
        .block_on(async {
            let (client, conn) =
                tokio_postgres::connect(&format!("{base}/postgres"), tokio_postgres::NoTls)
                    .await
                    .map_err(|e| format!("cannot connect to {base}: {e}"))?;
            tokio::spawn(conn);
            client
                .batch_execute(sql)
                .await
                .map_err(|e| format!("{sql}: {e}"))
        })
}
