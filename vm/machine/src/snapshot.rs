//! A picture of where a run is, taken between machine steps: every live fiber's call stack
//! with the loops each frame is inside, and the parallel blocks waiting for their branches.
//! `state.md` is written from it; nothing reads it back.

/// Where the machine is.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Snapshot {
    /// Live fibers (the program's and its branches'), in creation order.
    pub fibers: Vec<FiberView>,
    /// Parallel blocks and fan-outs whose join has not completed.
    pub forks: Vec<ForkView>,
    /// Live fibers left out of `fibers` (a snapshot lists at most [`Snapshot::MAX_FIBERS`]).
    pub more_fibers: usize,
}

impl Snapshot {
    /// The most fibers a snapshot describes.
    pub const MAX_FIBERS: usize = 32;
}

/// One live fiber.
#[derive(Clone, Debug, PartialEq)]
pub struct FiberView {
    /// Its lineage (`0` for the program, `0.1` for its second branch, ...), the prefix of
    /// its request ids.
    pub lineage: String,
    /// `running`, `waiting for <request>` or `joining`.
    pub status: String,
    /// Its frames, outermost first.
    pub frames: Vec<FrameView>,
}

/// One frame of a fiber's stack.
#[derive(Clone, Debug, PartialEq)]
pub struct FrameView {
    /// The module it runs in.
    pub module: u32,
    /// The program's name for the module.
    pub program: String,
    /// The function: `main`, a block's name, or a generated branch name.
    pub function: String,
    /// The execution id of the block call or invocation it belongs to (0: the top level).
    pub exec: u32,
    /// The line of the statement it is at.
    pub line: u32,
    /// The loops it is inside, outermost first.
    pub loops: Vec<LoopView>,
}

/// A loop in progress.
#[derive(Clone, Debug, PartialEq)]
pub struct LoopView {
    /// The loop statement's line.
    pub line: u32,
    /// `for`, `repeat` or `loop`.
    pub kind: &'static str,
    /// The iteration under way (1-based).
    pub iteration: i64,
    /// The iterations allowed, if bounded.
    pub max: Option<i64>,
}

/// A fork waiting for its join.
#[derive(Clone, Debug, PartialEq)]
pub struct ForkView {
    /// The module it is in.
    pub module: u32,
    /// The line of the statement that forked.
    pub line: u32,
    /// Its join strategy.
    pub strategy: &'static str,
    /// Branches in all.
    pub branches: usize,
    /// Branches that succeeded.
    pub succeeded: usize,
    /// Branches that ended (succeeded, failed or cancelled).
    pub finished: usize,
}
