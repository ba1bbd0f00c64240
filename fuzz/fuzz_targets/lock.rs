//! Feeds arbitrary text to the `prose.lock` parser: it must read it or refuse it with an
//! error, never panic or hang. A lock it reads must render (as `prosec build` writes it) and
//! read back the same, its entries sorted by source, and render the same again.
#![no_main]

use libfuzzer_sys::fuzz_target;
use prosec::ship::lock::Lock;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(lock) = Lock::parse(text) else {
        return;
    };
    let rendered = lock.render();
    let again = Lock::parse(&rendered).expect("a rendered lock reads back");
    let mut sorted = lock.clone();
    sorted.git.sort_by(|a, b| a.source.cmp(&b.source));
    sorted.npm.sort_by(|a, b| a.source.cmp(&b.source));
    sorted.program.sort_by(|a, b| a.source.cmp(&b.source));
    assert_eq!(
        again, sorted,
        "the lock changed through rendering:\n{rendered}"
    );
    assert_eq!(again.render(), rendered);
});
