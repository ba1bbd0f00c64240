//! Hand-made artifacts for the loader and verifier tests: a small builder for module tables
//! and [`sample`], a realistic two-module program that exercises every opcode.

use bytecode_spec::artifact::Header;
use bytecode_spec::*;

/// Builds one module table by table. Strings are interned; every function gets one source
/// position per instruction.
pub struct ModuleBuilder {
    /// The module being built; tests may also edit it directly.
    pub m: Module,
}

impl ModuleBuilder {
    /// An empty module; its entry must be set with [`ModuleBuilder::main`] (or by hand).
    pub fn new(name: &str, import_path: &str) -> Self {
        ModuleBuilder {
            m: Module {
                name: name.into(),
                import_path: import_path.into(),
                source: format!("# {name}\n"),
                strings: Default::default(),
                consts: Default::default(),
                templates: Default::default(),
                keysets: Default::default(),
                agents: Default::default(),
                sessions: Default::default(),
                choices: Default::default(),
                forks: Default::default(),
                tables: Default::default(),
                inputs: Default::default(),
                outputs: Default::default(),
                programs: Default::default(),
                skills: Default::default(),
                funcs: Default::default(),
                entry: FuncId::from_u32(0),
            },
        }
    }

    /// The id of string `s`, added if new.
    pub fn str(&mut self, s: &str) -> StrId {
        match self.m.strings.iter().find(|(_, t)| t.as_str() == s) {
            Some((id, _)) => id,
            None => self.m.strings.push(s.into()),
        }
    }

    /// A new constant.
    pub fn konst(&mut self, c: Const) -> ConstId {
        self.m.consts.push(c)
    }

    /// A new string constant.
    pub fn text(&mut self, s: &str) -> ConstId {
        let s = self.str(s);
        self.konst(Const::Str(s))
    }

    /// A literal template part.
    pub fn lit(&mut self, s: &str) -> TplPart {
        TplPart::Text(self.str(s))
    }

    /// A template part reading register `reg` of the frame `depth` static links out.
    pub fn var(&mut self, depth: u8, reg: u32, name: &str) -> TplPart {
        TplPart::Var {
            depth,
            reg: Reg::from_u32(reg),
            path: Vec::new(),
            name: self.str(name),
        }
    }

    /// A new template.
    pub fn tpl(&mut self, parts: Vec<TplPart>) -> TplId {
        self.m.templates.push(Template { parts })
    }

    /// A new function named `name`.
    pub fn func(
        &mut self,
        name: &str,
        kind: FuncKind,
        params: u32,
        nregs: u32,
        code: Vec<Op>,
    ) -> FuncId {
        let name = self.str(name);
        let locs = (0..code.len() as u32)
            .map(|i| Loc {
                line: i + 1,
                col: 1,
            })
            .collect();
        self.m.funcs.push(Function {
            name,
            kind,
            params,
            nregs,
            code,
            locs,
            vars: Vec::new(),
        })
    }

    /// A new main function, made the module's entry.
    pub fn main(&mut self, nregs: u32, code: Vec<Op>) -> FuncId {
        let f = self.func("main", FuncKind::Main, 0, nregs, code);
        self.m.entry = f;
        f
    }

    /// A new fork descriptor waiting for every branch, with unnamed branches.
    pub fn fork(&mut self, branches: Vec<FuncId>) -> ForkId {
        let names = vec![None; branches.len()];
        self.m.forks.push(ForkDesc {
            strategy: Strategy::All,
            count: 1,
            on_fail: OnFail::FailFast,
            branches,
            names,
        })
    }

    /// A new jump table.
    pub fn table(&mut self, targets: Vec<Pc>) -> TableId {
        self.m.tables.push(targets)
    }

    /// A new input declaration.
    pub fn input(&mut self, name: &str, description: Option<TplId>, parameter: bool) -> InputId {
        let name = self.str(name);
        self.m.inputs.push(InputDesc {
            name,
            description,
            parameter,
        })
    }

    /// A new output declaration.
    pub fn output(&mut self, name: &str) -> OutputId {
        let name = self.str(name);
        self.m.outputs.push(OutputDesc { name })
    }

    /// A new import of module `module` of the artifact.
    pub fn import(&mut self, alias: &str, module: u32) -> ProgId {
        let alias = self.str(alias);
        self.m.programs.push(ProgramRef { alias, module })
    }

    /// The finished module.
    pub fn finish(self) -> Module {
        self.m
    }
}

/// Register `i`.
pub fn r(i: u32) -> Reg {
    Reg::from_u32(i)
}

/// The header the tests write.
pub fn header() -> Header {
    Header {
        compiler_version: "prosec 0.1.0".into(),
        source_hash: std::array::from_fn(|i| i as u8 * 7),
    }
}

/// A one-module artifact whose main function has `nregs` registers and runs `code`.
pub fn single(nregs: u32, code: Vec<Op>) -> Artifact {
    let mut b = ModuleBuilder::new("main", "");
    b.main(nregs, code);
    Artifact {
        modules: vec![b.finish()],
        skills: Vec::new(),
    }
}

/// The imported module of [`sample`]: one parameter `topic`, one output `summary`.
fn library() -> Module {
    let mut b = ModuleBuilder::new("summarize", "./summarize.prose");
    let topic = b.input("topic", None, true);
    let summary = b.output("summary");
    let parts = vec![b.lit("Summary of "), b.var(0, 0, "topic")];
    let t = b.tpl(parts);
    b.main(
        2,
        vec![
            Op::LoadInput {
                dst: r(0),
                input: topic,
            },
            Op::Format { dst: r(1), tpl: t },
            Op::SetOutput {
                output: summary,
                src: r(1),
            },
            Op::Return { src: r(1) },
        ],
    );
    b.finish()
}

/// A realistic two-module program using every opcode and every kind of table entry: a
/// session with an agent, a try region with catch and finally, loops, a block call, a
/// parallel block whose branches reach the main frame, a fan-out, a jump table, a choice,
/// inputs, outputs and an imported program.
pub fn sample() -> Artifact {
    let mut b = ModuleBuilder::new("main", "");
    let world = b.text("world");
    let null = b.konst(Const::Null);
    let zero = b.konst(Const::Int(0));
    let one = b.konst(Const::Int(1));
    let three = b.konst(Const::Int(3));
    let yes = b.konst(Const::Bool(true));
    let temperature = b.konst(Const::Float(0.5));

    let parts = vec![b.lit("Hello, "), b.var(0, 0, "name"), b.lit("!")];
    let greet = b.tpl(parts);
    let parts = vec![b.lit("Read "), b.var(0, 0, "name")];
    let pattern = b.tpl(parts);
    // Agent-level templates are rendered outside any frame: no variables.
    let parts = vec![b.lit("*.md")];
    let agent_pattern = b.tpl(parts);
    let parts = vec![b.lit("Is "), b.var(0, 3, "answer"), b.lit(" polite?")];
    let polite = b.tpl(parts);
    let parts = vec![b.lit("Which tone?")];
    let tone = b.tpl(parts);
    let parts = vec![b.lit("formal")];
    let formal = b.tpl(parts);
    let parts = vec![b.lit("casual")];
    let casual = b.tpl(parts);
    let parts = vec![b.lit("Go on with "), b.var(0, 1, "greeting"), b.lit("?")];
    let confirm_q = b.tpl(parts);
    // Read by the first parallel branch: its own register and one of the main frame.
    let mut parts = vec![b.var(0, 0, "name"), b.lit(" / "), b.var(1, 14, "results")];
    if let TplPart::Var { path, .. } = &mut parts[2] {
        let s = b.str("length");
        path.extend([PathStep::Index(0), PathStep::Field(s)]);
    }
    let branch_tpl = b.tpl(parts);

    let agent_name = b.str("writer");
    let sonnet = b.str("sonnet");
    let agent_prompt = b.str("You write greetings.");
    let style = b.str("style");
    let read = b.str("read");
    let allow = b.str("allow");
    let bash = b.str("bash");
    let temperature_s = b.str("temperature");
    let agent = b.m.agents.push(AgentTemplate {
        name: agent_name,
        model: Some(sonnet),
        prompt: Some(agent_prompt),
        persist: Persist::Project,
        skills: vec![style],
        permissions: vec![
            Permission {
                kind: read,
                value: PermissionValue::Patterns(vec![agent_pattern]),
            },
            Permission {
                kind: bash,
                value: PermissionValue::Word(allow),
            },
        ],
        extra: vec![(temperature_s, temperature)],
    });
    let greet_s = b.str("greet");
    let label = b.tpl(vec![TplPart::Text(greet_s)]);
    let name_s = b.str("name");
    let greeting_s = b.str("greeting");
    let session = b.m.sessions.push(SessionDesc {
        kind: SessionKind::Fresh,
        agent: Some(agent),
        label: Some(label),
        prompt: Some(greet),
        system: Some(greet),
        model: Some(sonnet),
        context_labels: vec![name_s, greeting_s],
        permissions: vec![Permission {
            kind: read,
            value: PermissionValue::Patterns(vec![pattern]),
        }],
        skills: vec![style],
        retry: 2,
        backoff: Backoff::Exponential,
        line: 4,
    });
    let choice = b.m.choices.push(ChoiceDesc {
        criteria: tone,
        options: vec![formal, casual],
    });
    let keys = b.m.keysets.push(vec![name_s, greeting_s]);
    let topic = b.input("topic", None, true);
    let confirm = b.input("confirm", Some(confirm_q), false);
    let result = b.output("result");
    let lib = b.import("summarize", 1);
    let summary = b.str("summary");
    let pair = b.str("pair");

    // A block taking one argument; it reads `name` of the main frame and runs `repeat`.
    let block = b.func(
        "pair_up",
        FuncKind::Block,
        1,
        6,
        vec![
            /* 0 */
            Op::GetUp {
                dst: r(1),
                depth: 1,
                reg: r(0),
            },
            /* 1 */
            Op::MakeList {
                dst: r(2),
                first: r(0),
                len: 2,
            },
            /* 2 */ Op::LoadConst { dst: r(3), c: zero },
            /* 3 */
            Op::LoadConst {
                dst: r(4),
                c: three,
            },
            /* 4 */
            Op::RepeatNext {
                count: r(4),
                counter: r(3),
                index: Some(r(5)),
                exit: 6,
            },
            /* 5 */ Op::Jump { target: 4 },
            /* 6 */
            Op::SetBlockOutput {
                name: pair,
                src: r(2),
            },
            /* 7 */ Op::Return { src: r(2) },
        ],
    );
    // Two parallel branches: one formats with a main-frame variable, one writes `acc`.
    let branch_a = b.func(
        "branch_a",
        FuncKind::Branch,
        0,
        2,
        vec![
            Op::GetUp {
                dst: r(0),
                depth: 1,
                reg: r(0),
            },
            Op::Format {
                dst: r(1),
                tpl: branch_tpl,
            },
            Op::Return { src: r(1) },
        ],
    );
    let branch_b = b.func(
        "branch_b",
        FuncKind::Branch,
        0,
        3,
        vec![
            /* 0 */ Op::LoadConst { dst: r(0), c: zero },
            /* 1 */
            Op::LoadConst {
                dst: r(1),
                c: three,
            },
            /* 2 */
            Op::LoopNext {
                counter: r(0),
                max: Some(r(1)),
                index: Some(r(2)),
                exit: 4,
            },
            /* 3 */ Op::Jump { target: 2 },
            /* 4 */
            Op::SetUp {
                depth: 1,
                reg: r(10),
                src: r(2),
            },
            /* 5 */ Op::Return { src: r(2) },
        ],
    );
    // The fan-out body: `(item, index)`.
    let each = b.func(
        "each",
        FuncKind::Branch,
        2,
        4,
        vec![
            Op::MakeList {
                dst: r(2),
                first: r(0),
                len: 2,
            },
            Op::GetUp {
                dst: r(3),
                depth: 1,
                reg: r(1),
            },
            Op::Return { src: r(2) },
        ],
    );
    let par = b.fork(vec![branch_a, branch_b]);
    b.m.forks[par].names = vec![Some(greeting_s), None];
    let fan = b.fork(vec![each]);
    b.m.forks[fan].strategy = Strategy::Any;
    b.m.forks[fan].on_fail = OnFail::Ignore;
    let table = b.table(vec![26, 28]);

    // Registers: r0 name, r1 greeting, r2 context list, r3 answer, r4 err, r5 pending,
    // r6 scratch, r7 counter, r8 item, r9 index, r10 acc, r11..r12 call result, r13 group,
    // r14 results, r15 switch index, r16 record, r17 flag, r18 topic.
    b.main(
        19,
        vec![
            /* 0 */
            Op::LoadInput {
                dst: r(18),
                input: topic,
            },
            /* 1 */
            Op::LoadConst {
                dst: r(0),
                c: world,
            },
            /* 2 */
            Op::Format {
                dst: r(1),
                tpl: greet,
            },
            /* 3 */
            Op::MakeList {
                dst: r(2),
                first: r(0),
                len: 2,
            },
            /* 4 */
            Op::Session {
                dst: r(3),
                desc: session,
                ctx: r(2),
            },
            /* 5 */ Op::LoadConst { dst: r(5), c: null },
            /* 6 */
            Op::TryEnter {
                catch: Some(10),
                finally: Some(12),
                err: r(4),
                pending: r(5),
            },
            /* 7 */
            Op::Convert {
                dst: r(6),
                src: r(3),
                shape: Shape::Int,
            },
            /* 8 */ Op::TryExit,
            /* 9 */ Op::Jump { target: 12 },
            /* 10: catch */
            Op::Move {
                dst: r(6),
                src: r(4),
            },
            /* 11 */ Op::TryExit,
            /* 12: finally */ Op::EndFinally { pending: r(5) },
            /* 13 */ Op::LoadConst { dst: r(7), c: zero },
            /* 14 */
            Op::LoadConst {
                dst: r(10),
                c: zero,
            },
            /* 15 */
            Op::ForNext {
                list: r(2),
                counter: r(7),
                item: r(8),
                index: Some(r(9)),
                exit: 18,
            },
            /* 16 */
            Op::Binary {
                op: BinOp::Add,
                dst: r(10),
                a: r(10),
                b: r(9),
            },
            /* 17 */ Op::Jump { target: 15 },
            /* 18 */
            Op::Call {
                func: block,
                args: r(8),
                argc: 1,
                dst: r(11),
            },
            /* 19 */
            Op::Fork {
                fork: par,
                handle: r(13),
            },
            /* 20 */
            Op::Join {
                handle: r(13),
                dst: r(14),
            },
            /* 21 */
            Op::ForkEach {
                fork: fan,
                list: r(2),
                handle: r(13),
            },
            /* 22 */
            Op::Join {
                handle: r(13),
                dst: r(14),
            },
            /* 23 */
            Op::GetIndex {
                dst: r(6),
                src: r(14),
                index: r(9),
            },
            /* 24 */ Op::LoadConst { dst: r(15), c: one },
            /* 25 */
            Op::Switch {
                index: r(15),
                table,
            },
            /* 26 */
            Op::Neg {
                dst: r(6),
                src: r(15),
            },
            /* 27 */ Op::Jump { target: 29 },
            /* 28 */ Op::LoadConst { dst: r(6), c: zero },
            /* 29 */
            Op::Invoke {
                prog: lib,
                args: r(18),
                dst: r(16),
            },
            /* 30 */
            Op::GetField {
                dst: r(6),
                src: r(16),
                name: summary,
            },
            /* 31 */
            Op::MakeRecord {
                dst: r(16),
                first: r(0),
                keys,
            },
            /* 32 */ Op::Choose { dst: r(15), choice },
            /* 33 */
            Op::Ask {
                dst: r(17),
                input: confirm,
            },
            /* 34 */
            Op::Convert {
                dst: r(17),
                src: r(17),
                shape: Shape::Bool,
            },
            /* 35 */
            Op::Assert {
                cond: r(17),
                msg: Some(r(1)),
            },
            /* 36 */
            Op::TryEnter {
                catch: Some(42),
                finally: None,
                err: r(4),
                pending: r(5),
            },
            /* 37 */
            Op::Evaluate {
                dst: r(17),
                cond: polite,
            },
            /* 38 */
            Op::JumpIf {
                cond: r(17),
                target: 40,
            },
            /* 39 */ Op::Throw { msg: r(1) },
            /* 40 */ Op::TryExit,
            /* 41 */ Op::Jump { target: 46 },
            /* 42: catch */ Op::TryExit,
            /* 43 */
            Op::Not {
                dst: r(17),
                src: r(17),
            },
            /* 44 */
            Op::JumpIfNot {
                cond: r(17),
                target: 46,
            },
            /* 45 */ Op::Rethrow { err: r(4) },
            /* 46 */ Op::LoadConst { dst: r(17), c: yes },
            /* 47 */
            Op::SetOutput {
                output: result,
                src: r(6),
            },
            /* 48 */ Op::Return { src: r(6) },
        ],
    );
    Artifact {
        modules: vec![b.finish(), library()],
        skills: Vec::new(),
    }
}
