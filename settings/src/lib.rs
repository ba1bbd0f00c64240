//! `prose.toml`, read once for both tools. [`files`] finds the project's file and the user's
//! and layers them; [`Settings`] is the one schema (driver, models and aliases, prices,
//! budgets, timeouts, sampling, tools, MCP servers, allowances, lints, formatting); [`models`]
//! resolves the spec's model aliases for the drivers and for `prosec cost` alike; [`prices`]
//! is the one price table, [`cache`] the prompt caching its cache prices follow, and
//! [`turns`] whether agent-loop turns are structured.

pub mod cache;
pub mod files;
pub mod models;
pub mod prices;
mod schema;
pub mod turns;

pub use schema::*;
