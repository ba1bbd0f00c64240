//! Listings of hand-built and corrupted artifacts: exact text, and no panic on anything.

use super::*;
use crate::op::*;
use cranelift_entity::{EntityRef, PrimaryMap};

/// Interns strings for a hand-built module.
struct B {
    m: Module,
}

impl B {
    fn new(name: &str, source: &str) -> B {
        B {
            m: Module {
                name: name.into(),
                import_path: String::new(),
                source: source.into(),
                strings: PrimaryMap::new(),
                consts: PrimaryMap::new(),
                templates: PrimaryMap::new(),
                keysets: PrimaryMap::new(),
                agents: PrimaryMap::new(),
                sessions: PrimaryMap::new(),
                choices: PrimaryMap::new(),
                forks: PrimaryMap::new(),
                tables: PrimaryMap::new(),
                inputs: PrimaryMap::new(),
                outputs: PrimaryMap::new(),
                programs: PrimaryMap::new(),
                skills: Vec::new(),
                funcs: PrimaryMap::new(),
                entry: FuncId::new(0),
            },
        }
    }

    fn s(&mut self, text: &str) -> StrId {
        match self.m.strings.iter().find(|(_, t)| *t == text) {
            Some((id, _)) => id,
            None => self.m.strings.push(text.into()),
        }
    }

    fn text(&mut self, text: &str) -> TplPart {
        TplPart::Text(self.s(text))
    }

    fn var(&mut self, name: &str, depth: u8, reg: u32) -> TplPart {
        TplPart::Var {
            depth,
            reg: Reg::from_u32(reg),
            path: Vec::new(),
            name: self.s(name),
        }
    }

    fn tpl(&mut self, parts: Vec<TplPart>) -> TplId {
        self.m.templates.push(Template { parts })
    }
}

fn r(n: u32) -> Reg {
    Reg::from_u32(n)
}

fn loc(line: u32) -> Loc {
    Loc { line, col: 1 }
}

fn header() -> Header {
    let mut source_hash = [0u8; 32];
    for (i, b) in source_hash.iter_mut().enumerate() {
        *b = i as u8 * 8;
    }
    Header {
        compiler_version: "0.1.0".into(),
        source_hash,
    }
}

/// A program using most of the tables:
///
/// ```text
/// 1 input topic: "The topic"
/// 2 agent researcher: ...
/// 3 let notes = session: researcher
/// 4 try:
/// 5   parallel:
/// 6     a = session "Research {topic}"
/// 7 catch as err:
/// 8   throw
/// ```
fn sample() -> Artifact {
    let mut b = B::new(
            "research",
            "input topic: \"The topic\"\nagent researcher:\nlet notes = session: researcher\n  try:\n    parallel:\n      a = session \"Research {topic}\"\ncatch as err:\n  throw\n",
        );
    let main_name = b.s("main");
    let branch_name = b.s("parallel@5.0");
    let topic = b.s("topic");
    let researcher = b.s("researcher");
    let sonnet = b.s("sonnet");
    let agent_prompt = b.s("You research {topic}.");
    let read = b.s("read");
    let bash = b.s("bash");
    let deny = b.s("deny");
    let notes = b.s("notes");
    let a = b.s("a");
    let hello = b.s("say \"hi\"\n");
    let pattern = {
        let t = b.text("docs/**");
        b.tpl(vec![t])
    };
    let desc = {
        let t = b.text("The topic");
        b.tpl(vec![t])
    };
    let prompt = {
        let t = b.text("Research ");
        let v = b.var("topic", 1, 0);
        let t2 = b.text(" {literally}");
        b.tpl(vec![t, v, t2])
    };
    let temperature = b.s("temperature");
    let web_search = b.s("web-search");
    let k_null = b.m.consts.push(Const::Null);
    let k_float = b.m.consts.push(Const::Float(0.5));
    let k_str = b.m.consts.push(Const::Str(hello));
    let k_int = b.m.consts.push(Const::Int(-3));
    let agent = b.m.agents.push(AgentTemplate {
        name: researcher,
        model: Some(sonnet),
        prompt: Some(agent_prompt),
        persist: Persist::Project,
        skills: vec![web_search],
        permissions: vec![
            Permission {
                kind: read,
                value: PermissionValue::Patterns(vec![pattern]),
            },
            Permission {
                kind: bash,
                value: PermissionValue::Word(deny),
            },
        ],
        extra: vec![(temperature, k_float)],
    });
    let notes_label = {
        let part = b.text("notes");
        b.tpl(vec![part])
    };
    let s_notes = b.m.sessions.push(SessionDesc {
        kind: SessionKind::Resume,
        agent: Some(agent),
        label: Some(notes_label),
        prompt: None,
        system: None,
        model: Some(sonnet),
        context_labels: vec![],
        permissions: vec![],
        skills: vec![],
        retry: 2,
        backoff: Backoff::Exponential,
        line: 3,
    });
    let s_research = b.m.sessions.push(SessionDesc {
        kind: SessionKind::Fresh,
        agent: None,
        label: None,
        prompt: Some(prompt),
        system: None,
        model: None,
        context_labels: vec![notes],
        permissions: vec![],
        skills: vec![],
        retry: 0,
        backoff: Backoff::None,
        line: 6,
    });
    let input = b.m.inputs.push(InputDesc {
        name: topic,
        description: Some(desc),
        parameter: true,
    });
    let keys = b.m.keysets.push(vec![notes, a]);
    let main = b.m.funcs.push(Function {
        name: main_name,
        kind: FuncKind::Main,
        params: 0,
        nregs: 8,
        code: Vec::new(),
        locs: Vec::new(),
        vars: Vec::new(),
    });
    let branch = b.m.funcs.push(Function {
        name: branch_name,
        kind: FuncKind::Branch,
        params: 0,
        nregs: 3,
        vars: Vec::new(),
        code: vec![
            Op::MakeList {
                dst: r(1),
                first: r(0),
                len: 0,
            },
            Op::Session {
                dst: r(0),
                desc: s_research,
                ctx: r(1),
            },
            Op::Return { src: r(0) },
        ],
        locs: vec![loc(6), loc(6), loc(6)],
    });
    let fork = b.m.forks.push(ForkDesc {
        strategy: Strategy::All,
        count: 1,
        on_fail: OnFail::FailFast,
        branches: vec![branch],
        names: vec![Some(a)],
    });
    let code = vec![
        Op::LoadInput { dst: r(0), input },
        Op::LoadConst {
            dst: r(2),
            c: k_null,
        },
        Op::Session {
            dst: r(1),
            desc: s_notes,
            ctx: r(2),
        },
        Op::TryEnter {
            catch: Some(8),
            finally: None,
            err: r(3),
            pending: r(4),
        },
        Op::Fork { fork, handle: r(5) },
        Op::Join {
            handle: r(5),
            dst: r(6),
        },
        Op::TryExit,
        Op::Jump { target: 10 },
        Op::TryExit,
        Op::Rethrow { err: r(3) },
        Op::LoadConst {
            dst: r(6),
            c: k_str,
        },
        Op::LoadConst {
            dst: r(7),
            c: k_int,
        },
        Op::MakeRecord {
            dst: r(5),
            first: r(6),
            keys,
        },
        Op::Binary {
            op: BinOp::Ge,
            dst: r(2),
            a: r(6),
            b: r(7),
        },
        Op::JumpIfNot {
            cond: r(2),
            target: 3,
        },
        Op::Return { src: r(5) },
    ];
    let lines = [1, 3, 3, 4, 5, 5, 5, 5, 7, 8, 0, 0, 0, 0, 0, 0];
    b.m.funcs[main].locs = lines.iter().map(|&l| loc(l)).collect();
    b.m.funcs[main].code = code;
    b.m.entry = main;
    Artifact {
        modules: vec![b.m],
        skills: Vec::new(),
    }
}

#[test]
fn listing_of_a_sample() {
    let a = sample();
    crate::verify::verify(&a).expect("the sample verifies");
    let text = disassemble(&header(), &a);
    let expected = r#"artifact
  format    3
  compiler  0.1.0
  source    sha256 0008101820283038404850586068707880889098a0a8b0b8c0c8d0d8e0e8f0f8
  modules   1

module 0 research (main program)
  entry f0 main
  agents:
    agent0 researcher
      model: sonnet
      prompt: "You research {topic}."
      persist: project
      skills: web-search
      permissions: read=["docs/**"], bash=deny
      extra: temperature=0.5
  sessions:
    sess0 resume, agent agent0 researcher, label t3 "notes", line 3
      model: sonnet
      retry: 2, backoff exponential
    sess1 session, line 6
      prompt: t2 "Research {topic} \{literally\}"
      context: notes
  forks:
    fork0 all, count 1, on-fail fail-fast
      branch 0: f1 parallel@5.0, assigns a
  inputs:
    in0 topic parameter t1 "The topic"
  templates:
    t0 "docs/**"
    t1 "The topic"
    t2 "Research {topic} \{literally\}"  [topic=up1.r0]
    t3 "notes"

  function f0 main (main, params 0, registers 8)
       0  load_input r0, in0 topic          ; line 1: input topic: "The topic"
       1  load_const r2, null               ; line 3: let notes = session: researcher
       2  session r1, sess0 agent0 researcher "notes" ctx=r2  ; line 3
       3  try_enter catch=8 finally=none err=r3 pending=r4  ; line 4: try:
       4  fork r5, fork0 all [f1]           ; line 5: parallel:
       5  join r6, r5                       ; line 5
       6  try_exit                          ; line 5
       7  jump 10                           ; line 5
       8  try_exit                          ; line 7: catch as err:
       9  rethrow r3                        ; line 8: throw
      10  load_const r6, "say \"hi\"\n"
      11  load_const r7, -3
      12  make_record r5, keys0 {notes: r6, a: r7}
      13  binary r2, r6 >= r7
      14  jump_if_not r2, 3
      15  return r5

  function f1 parallel@5.0 (branch, params 0, registers 3)
       0  make_list r1, []                  ; line 6: a = session "Research {topic}"
       1  session r0, sess1 "Research {topic} \{literally\}" ctx=r1  ; line 6
       2  return r0                         ; line 6
"#;
    assert_eq!(text, expected, "got:\n{text}");
}

#[test]
fn invoke_names_parameters_and_long_lists_are_cut() {
    let mut a = sample();
    let mut helper = B::new("helper", "");
    for (name, parameter) in [("topic", true), ("question", false), ("depth", true)] {
        let name = helper.s(name);
        helper.m.inputs.push(InputDesc {
            name,
            description: None,
            parameter,
        });
    }
    let name = helper.s("main");
    helper.m.funcs.push(Function {
        name,
        kind: FuncKind::Main,
        params: 0,
        nregs: 1,
        code: vec![Op::Return { src: r(0) }],
        locs: vec![loc(1)],
        vars: Vec::new(),
    });
    helper.m.import_path = "@alice/helper".into();
    a.modules.push(helper.m);
    let m = &mut a.modules[0];
    let alias = m.strings.push("help".into());
    let prog = m.programs.push(ProgramRef { alias, module: 1 });
    let table = m.tables.push(vec![15; 20]);
    let many = m.keysets.push(vec![StrId::new(0); 10]);
    m.funcs[FuncId::new(0)].nregs = 16;
    m.funcs[FuncId::new(0)].code[0] = Op::Invoke {
        prog,
        args: r(3),
        dst: r(2),
    };
    m.funcs[FuncId::new(0)].code[1] = Op::Switch { index: r(1), table };
    m.funcs[FuncId::new(0)].code[10] = Op::MakeRecord {
        dst: r(0),
        first: r(0),
        keys: many,
    };
    m.funcs[FuncId::new(0)].code[11] = Op::MakeList {
        dst: r(0),
        first: r(1),
        len: 12,
    };
    crate::verify::verify(&a).expect("still verifies");
    let text = disassemble(&header(), &a);
    for needle in [
            "prog0 help -> module 1 helper",
            "module 1 helper (imported as \"@alice/helper\")",
            "invoke r2, prog0 help args=[topic=r3, depth=r4]",
            "switch r1, table0 [15, 15, 15, 15, 15, 15, 15, 15, ... (20 in all)]",
            "make_record r0, keys1 {main: r0, main: r1, main: r2, main: r3, main: r4, main: r5, main: r6, main: r7, ... (10 in all)}",
            "make_list r0, [r1 .. r12] (12 registers)",
        ] {
            assert!(text.contains(needle), "missing {needle:?} in:\n{text}");
        }
}

/// The example in the module documentation.
#[test]
fn hello() {
    let mut b = B::new(
        "hello",
        "input name: \"Who to greet\"\nsession \"Say hello to {name}\"\n",
    );
    let desc = {
        let t = b.text("Who to greet");
        b.tpl(vec![t])
    };
    let prompt = {
        let t = b.text("Say hello to ");
        let v = b.var("name", 0, 0);
        b.tpl(vec![t, v])
    };
    let name = b.s("name");
    let input = b.m.inputs.push(InputDesc {
        name,
        description: Some(desc),
        parameter: true,
    });
    let sess = b.m.sessions.push(SessionDesc {
        kind: SessionKind::Fresh,
        agent: None,
        label: None,
        prompt: Some(prompt),
        system: None,
        model: None,
        context_labels: vec![],
        permissions: vec![],
        skills: vec![],
        retry: 0,
        backoff: Backoff::None,
        line: 2,
    });
    let main = b.s("main");
    b.m.funcs.push(Function {
        name: main,
        kind: FuncKind::Main,
        params: 0,
        nregs: 3,
        vars: Vec::new(),
        code: vec![
            Op::LoadInput { dst: r(0), input },
            Op::MakeList {
                dst: r(2),
                first: r(0),
                len: 0,
            },
            Op::Session {
                dst: r(1),
                desc: sess,
                ctx: r(2),
            },
            Op::Return { src: r(1) },
        ],
        locs: vec![loc(1), loc(2), loc(2), loc(2)],
    });
    let a = Artifact {
        modules: vec![b.m],
        skills: Vec::new(),
    };
    crate::verify::verify(&a).expect("verifies");
    let h = Header {
        compiler_version: "0.1.0".into(),
        source_hash: [0xab; 32],
    };
    let expected = r#"artifact
  format    3
  compiler  0.1.0
  source    sha256 abababababababababababababababababababababababababababababababab
  modules   1

module 0 hello (main program)
  entry f0 main
  sessions:
    sess0 session, line 2
      prompt: t1 "Say hello to {name}"
  inputs:
    in0 name parameter t0 "Who to greet"
  templates:
    t0 "Who to greet"
    t1 "Say hello to {name}"  [name=r0]

  function f0 main (main, params 0, registers 3)
       0  load_input r0, in0 name           ; line 1: input name: "Who to greet"
       1  make_list r2, []                  ; line 2: session "Say hello to {name}"
       2  session r1, sess0 "Say hello to {name}" ctx=r2  ; line 2
       3  return r1                         ; line 2
"#;
    assert_eq!(disassemble(&h, &a), expected);
}

#[test]
fn mutated_encodings_do_not_panic() {
    let config = bincode::config::standard().with_limit::<{ 1 << 20 }>();
    let bytes = bincode::serde::encode_to_vec(sample(), config).expect("encodes");
    let mut decoded = 0;
    for at in 0..bytes.len() {
        for value in [0u8, 1, 7, 0x7f, 0xfb, 0xff] {
            let mut b = bytes.clone();
            b[at] = value;
            if let Ok((a, _)) = bincode::serde::decode_from_slice::<Artifact, _>(&b, config) {
                decoded += 1;
                let _ = disassemble(&header(), &a);
            }
        }
    }
    assert!(
        decoded > bytes.len(),
        "too few mutations decode ({decoded})"
    );
}

#[test]
fn deterministic() {
    let a = sample();
    assert_eq!(
        disassemble(&header(), &a),
        disassemble(&header(), &a.clone())
    );
}

#[test]
fn bad_ids_are_shown_not_fatal() {
    let mut a = sample();
    let m = &mut a.modules[0];
    m.entry = FuncId::from_u32(40);
    m.programs.push(ProgramRef {
        alias: StrId::from_u32(999),
        module: 7,
    });
    m.funcs[FuncId::new(1)].locs.clear();
    m.funcs[FuncId::new(0)].code = vec![
        Op::LoadConst {
            dst: r(0),
            c: ConstId::from_u32(77),
        },
        Op::Format {
            dst: r(0),
            tpl: TplId::from_u32(12),
        },
        Op::Session {
            dst: r(1),
            desc: SessionId::from_u32(9),
            ctx: r(2),
        },
        Op::Call {
            func: FuncId::from_u32(5),
            args: r(u32::MAX - 2),
            argc: u32::MAX,
            dst: r(u32::MAX - 1),
        },
        Op::MakeList {
            dst: r(0),
            first: r(4),
            len: 3,
        },
        Op::Invoke {
            prog: ProgId::from_u32(0),
            args: r(0),
            dst: r(1),
        },
        Op::GetField {
            dst: r(0),
            src: r(0),
            name: StrId::from_u32(500),
        },
        Op::Switch {
            index: r(0),
            table: TableId::from_u32(3),
        },
    ];
    let text = disassemble(&header(), &a);
    for needle in [
            "entry <bad f40>",
            "prog0 <bad s999> -> <bad module 7>",
            "load_const r0, <bad k77>",
            "format r0, <bad t12>",
            "session r1, <bad sess9> ctx=r2",
            "call r4294967294, <bad f5> args=[r4294967293 .. <bad r8589934587>] (4294967295 registers) outputs=<bad r4294967295>",
            "make_list r0, [r4, r5, r6]",
            "invoke r1, prog0 <bad s999> <bad module 7> args=r0",
            "get_field r0, r0, <bad s500>",
            "switch r0, <bad table3>",
            "<8 instructions but 16 source positions>",
        ] {
            assert!(text.contains(needle), "missing {needle:?} in:\n{text}");
        }
    assert!(
        text.contains("<3 instructions but 0 source positions>"),
        "{text}"
    );
    assert!(text.contains("; <no source position>"), "{text}");
}

#[test]
fn corrupt_tables_do_not_panic() {
    let mut a = sample();
    let m = &mut a.modules[0];
    let nowhere = StrId::from_u32(1 << 20);
    for t in m.templates.values_mut() {
        t.parts.push(TplPart::Text(nowhere));
        t.parts.push(TplPart::Var {
            depth: 9,
            reg: r(3),
            path: vec![PathStep::Field(nowhere), PathStep::Index(2)],
            name: nowhere,
        });
    }
    for ag in m.agents.values_mut() {
        ag.name = nowhere;
        ag.persist = Persist::Path(nowhere);
        ag.extra.push((nowhere, ConstId::from_u32(1000)));
    }
    for sd in m.sessions.values_mut() {
        sd.agent = Some(AgentId::from_u32(3));
        sd.prompt = Some(TplId::from_u32(30));
        sd.system = Some(TplId::new(2));
    }
    for fk in m.forks.values_mut() {
        fk.branches.push(FuncId::from_u32(66));
        fk.names.clear();
    }
    m.inputs.push(InputDesc {
        name: nowhere,
        description: Some(TplId::from_u32(31)),
        parameter: false,
    });
    m.outputs.push(OutputDesc { name: nowhere });
    m.choices.push(ChoiceDesc {
        criteria: TplId::from_u32(32),
        options: vec![TplId::new(0), TplId::from_u32(33)],
    });
    m.source = String::new();
    let code = vec![
        Op::Choose {
            dst: r(0),
            choice: ChoiceId::new(0),
        },
        Op::Choose {
            dst: r(0),
            choice: ChoiceId::new(1),
        },
        Op::Ask {
            dst: r(0),
            input: InputId::new(1),
        },
        Op::Ask {
            dst: r(0),
            input: InputId::new(9),
        },
        Op::SetOutput {
            output: OutputId::new(4),
            src: r(0),
        },
        Op::ForkEach {
            fork: ForkId::new(3),
            list: r(1),
            handle: r(2),
        },
        Op::MakeRecord {
            dst: r(0),
            first: r(u32::MAX - 1),
            keys: KeysId::new(0),
        },
        Op::MakeRecord {
            dst: r(0),
            first: r(0),
            keys: KeysId::new(5),
        },
    ];
    let n = code.len();
    let f = &mut m.funcs[FuncId::new(0)];
    f.code = code;
    f.locs = (0..n)
        .map(|i| loc(if i == 0 { u32::MAX } else { 1 }))
        .collect();
    let text = disassemble(&header(), &a);
    for needle in [
        "agent0 <bad s1048576>",
        "persist: path <bad s1048576>",
        "extra: temperature=0.5, <bad s1048576>=<bad k1000>",
        "sess0 resume, agent <bad agent3>",
        "prompt: <bad t30>",
        "{<bad s1048576>.<bad s1048576>[2]}",
        "[topic=up1.r0, <bad s1048576>=up9.r3]",
        "branch 1: <bad f66>, <no name entry>",
        "in1 <bad s1048576> mid-program <bad t31>",
        "out0 <bad s1048576>",
        "choice0 <bad t32>",
        "option 1: <bad t33>",
        "choose r0, <bad choice1>",
        "ask r0, <bad in9>",
        "set_output <bad out4>, r0",
        "fork_each r2, <bad fork3> list=r1",
        "make_record r0, keys0 {notes: r4294967294, a: <bad r4294967295>}",
        "make_record r0, <bad keys5> from r0",
        "; line 4294967295",
    ] {
        assert!(text.contains(needle), "missing {needle:?} in:\n{text}");
    }
}

#[test]
fn empty_artifact_and_odd_headers() {
    let h = Header {
        compiler_version: "v 1\u{0}\"x\"".into(),
        source_hash: [0xff; 32],
    };
    let text = disassemble(
        &h,
        &Artifact {
            modules: vec![],
            skills: Vec::new(),
        },
    );
    assert!(text.contains("compiler  \"v 1\\u{0}\\\"x\\\"\""), "{text}");
    assert!(text.contains(&"ff".repeat(32)), "{text}");
    assert!(text.ends_with("  modules   0\n"), "{text}");
}

#[test]
fn long_texts_are_cut_inline_but_whole_in_tables() {
    let mut a = sample();
    let m = &mut a.modules[0];
    let long = "x".repeat(100);
    let s = m.strings.push(long.clone());
    let t = m.templates.push(Template {
        parts: vec![TplPart::Text(s)],
    });
    m.funcs[FuncId::new(0)].code[0] = Op::Evaluate { dst: r(0), cond: t };
    let text = disassemble(&header(), &a);
    assert!(text.contains(&format!("t4 \"{long}\"\n")), "{text}");
    assert!(
        text.contains(&format!(
            "evaluate r0, t4 \"{}...\"",
            "x".repeat(INLINE_TEXT)
        )),
        "{text}"
    );
}
