//! The user's docs (README.md and docs/*.md) against the code, so that a figure, a default or
//! a link cannot drift from what the toolchain does: the flags, defaults and exit statuses of
//! docs/cli.md against both binaries' `--help` and the code's constants ([`cli`]); every
//! relative link and anchor ([`links`]); and the README's length and quick start, the
//! `prose.toml` keys and examples, the crate graph and the service's requests ([`facts`]);
//! the layers of design.md: no module importing one that imports it back, and an
//! interpreter without I/O ([`layers`]).
//! The binaries must be built (`cargo test --workspace` builds them).

#[path = "../support/mod.rs"]
mod support;

mod cli;
mod facts;
mod help;
mod layers;
mod links;
mod markdown;
