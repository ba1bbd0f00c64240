//! SPEC.md's instruction table (section 5.1) is checked against `op.rs`: one row per `Op`
//! variant, in order, its number the variant's index (its tag in the encoding), its name the
//! one the disassembler shows, its operands the variant's fields in order (`?` where the
//! field is optional), and its Term. and Susp. marks what `is_terminator` and `suspends`
//! say. An instruction added, renamed, reordered or changed without its row fails here.

use bytecode_spec::Op;

/// Every `Op` variant in order, each with its operands zeroed: decoded from its tag followed
/// by zeros (registers, ids and counts 0, options none, operator and shape the first).
fn every_op() -> Vec<Op> {
    let config = bincode::config::standard();
    (0u8..=250)
        .map_while(|tag| {
            let mut bytes = vec![0u8; 64];
            bytes[0] = tag;
            bincode::serde::decode_from_slice::<Op, _>(&bytes, config)
                .ok()
                .map(|(op, _)| op)
        })
        .collect()
}

/// A row of the summary table: number, name, operands, terminator, suspends.
struct Row {
    index: usize,
    name: String,
    operands: Vec<(String, bool)>,
    term: bool,
    susp: bool,
}

fn rows() -> Vec<Row> {
    let spec = include_str!("../SPEC.md");
    let table = spec
        .split("### 5.1 Summary")
        .nth(1)
        .expect("SPEC.md has section 5.1");
    table
        .lines()
        .skip_while(|l| !l.starts_with('|'))
        .take_while(|l| l.starts_with('|'))
        .skip(2)
        .map(|line| {
            let cells: Vec<&str> = line.trim_matches('|').split('|').map(str::trim).collect();
            assert_eq!(cells.len(), 5, "a row of five cells: {line}");
            let operands = match cells[2].trim_matches('`') {
                "—" => Vec::new(),
                list => list
                    .split(',')
                    .map(|o| {
                        let name = o.split(':').next().unwrap_or_default().trim();
                        let optional = o.trim().ends_with('?');
                        (name.trim_end_matches('?').to_string(), optional)
                    })
                    .collect(),
            };
            Row {
                index: cells[0].parse().expect("a number"),
                name: cells[1].trim_matches('`').to_string(),
                operands,
                term: cells[3] == "yes",
                susp: cells[4] == "yes",
            }
        })
        .collect()
}

#[test]
fn the_instruction_table_is_the_instruction_set() {
    let ops = every_op();
    let rows = rows();
    assert!(ops.len() > 30, "decoded {} instructions", ops.len());
    assert_eq!(
        rows.iter().map(|r| r.name.as_str()).collect::<Vec<_>>(),
        ops.iter().map(Op::name).collect::<Vec<_>>(),
        "SPEC.md 5.1 lists the instructions of op.rs, in order"
    );
    for (i, (op, row)) in ops.iter().zip(&rows).enumerate() {
        let name = op.name();
        assert_eq!(row.index, i, "{name}: its number is its tag");
        assert_eq!(row.term, op.is_terminator(), "{name}: Term.");
        assert_eq!(row.susp, op.suspends(), "{name}: Susp.");
        let fields: Vec<(String, bool)> = match serde_json::to_value(op).expect("json") {
            serde_json::Value::Object(variant) => match variant.into_iter().next() {
                Some((_, serde_json::Value::Object(f))) => {
                    f.into_iter().map(|(k, v)| (k, v.is_null())).collect()
                }
                _ => Vec::new(),
            },
            _ => Vec::new(),
        };
        assert_eq!(
            row.operands, fields,
            "{name}: its operands, `?` where optional"
        );
    }
}
