//! Typed indices: a register can never be confused with a string or a function.

use cranelift_entity::entity_impl;
use serde::{Deserialize, Serialize};

macro_rules! ids {
    ($( $(#[$doc:meta])* $name:ident => $prefix:literal, )*) => {
        $(
            $(#[$doc])*
            #[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
            pub struct $name(u32);
            entity_impl!($name, $prefix);
        )*
    };
}

ids! {
    /// A register of the current frame.
    Reg => "r",
    /// An interned string in [`crate::Module::strings`].
    StrId => "s",
    /// A constant in [`crate::Module::consts`].
    ConstId => "k",
    /// A string template in [`crate::Module::templates`].
    TplId => "t",
    /// A list of record keys in [`crate::Module::keysets`].
    KeysId => "keys",
    /// A function in [`crate::Module::funcs`].
    FuncId => "f",
    /// An agent template in [`crate::Module::agents`].
    AgentId => "agent",
    /// A session descriptor in [`crate::Module::sessions`].
    SessionId => "sess",
    /// A choice descriptor in [`crate::Module::choices`].
    ChoiceId => "choice",
    /// A fork descriptor in [`crate::Module::forks`].
    ForkId => "fork",
    /// A jump table in [`crate::Module::tables`].
    TableId => "table",
    /// An input declaration in [`crate::Module::inputs`].
    InputId => "in",
    /// An output declaration in [`crate::Module::outputs`].
    OutputId => "out",
    /// An imported program in [`crate::Module::programs`].
    ProgId => "prog",
}
