//! Tokens produced by the lexer and consumed by the LALRPOP grammar.

use crate::ast::StrLit;

/// One token. Layout tokens (`Newline`, `Indent`, `Dedent`) are computed on logical lines,
/// so a `"""` string spanning several lines is one token that never affects indentation.
#[derive(Clone, Debug, PartialEq)]
pub enum Tok {
    /// End of a logical line.
    Newline,
    /// The next line is indented deeper.
    Indent,
    /// The indentation level closes.
    Dedent,
    /// An identifier (may contain hyphens between name characters).
    Ident(String),
    /// An integer literal.
    Int(i64),
    /// A decimal literal.
    Float(f64),
    /// A `"..."` or `"""..."""` string.
    Str(StrLit),
    /// A `**...**` or `***...***` discretion text.
    Discretion(StrLit),
    /// `use`
    Use,
    /// `import`
    Import,
    /// `from`
    From,
    /// `as`
    As,
    /// `input`
    Input,
    /// `output`
    Output,
    /// `agent`
    Agent,
    /// `session`
    Session,
    /// `resume`
    Resume,
    /// `let`
    Let,
    /// `const`
    Const,
    /// `do`
    Do,
    /// `block`
    Block,
    /// `parallel`
    Parallel,
    /// `for`
    For,
    /// `in`
    In,
    /// `repeat`
    Repeat,
    /// `loop`
    Loop,
    /// `until`
    Until,
    /// `while`
    While,
    /// `try`
    Try,
    /// `catch`
    Catch,
    /// `finally`
    Finally,
    /// `throw`
    Throw,
    /// `assert`
    Assert,
    /// `choice`
    Choice,
    /// `option`
    Option,
    /// `if`
    If,
    /// `elif`
    Elif,
    /// `else`
    Else,
    /// `true`
    True,
    /// `false`
    False,
    /// `null`
    Null,
    /// `and`
    And,
    /// `or`
    Or,
    /// `not`
    Not,
    /// `is`
    Is,
    /// `:`
    Colon,
    /// `,`
    Comma,
    /// `.`
    Dot,
    /// `(`
    LParen,
    /// `)`
    RParen,
    /// `[`
    LBracket,
    /// `]`
    RBracket,
    /// `{`
    LBrace,
    /// `}`
    RBrace,
    /// `->`
    Arrow,
    /// `|`
    Pipe,
    /// `=`
    Assign,
    /// `==`
    EqEq,
    /// `!=`
    NotEq,
    /// `<`
    Lt,
    /// `<=`
    Le,
    /// `>`
    Gt,
    /// `>=`
    Ge,
    /// `+`
    Plus,
    /// `-`
    Minus,
}

/// Every keyword, for suggestions when one is misspelt.
pub const KEYWORDS: [&str; 37] = [
    "use", "import", "from", "as", "input", "output", "agent", "session", "resume", "let", "const",
    "do", "block", "parallel", "for", "in", "repeat", "loop", "until", "while", "try", "catch",
    "finally", "throw", "assert", "choice", "option", "if", "elif", "else", "true", "false",
    "null", "and", "or", "not", "is",
];

impl Tok {
    /// The keyword token for a word, if it is one.
    pub fn keyword(word: &str) -> Option<Tok> {
        Some(match word {
            "use" => Tok::Use,
            "import" => Tok::Import,
            "from" => Tok::From,
            "as" => Tok::As,
            "input" => Tok::Input,
            "output" => Tok::Output,
            "agent" => Tok::Agent,
            "session" => Tok::Session,
            "resume" => Tok::Resume,
            "let" => Tok::Let,
            "const" => Tok::Const,
            "do" => Tok::Do,
            "block" => Tok::Block,
            "parallel" => Tok::Parallel,
            "for" => Tok::For,
            "in" => Tok::In,
            "repeat" => Tok::Repeat,
            "loop" => Tok::Loop,
            "until" => Tok::Until,
            "while" => Tok::While,
            "try" => Tok::Try,
            "catch" => Tok::Catch,
            "finally" => Tok::Finally,
            "throw" => Tok::Throw,
            "assert" => Tok::Assert,
            "choice" => Tok::Choice,
            "option" => Tok::Option,
            "if" => Tok::If,
            "elif" => Tok::Elif,
            "else" => Tok::Else,
            "true" => Tok::True,
            "false" => Tok::False,
            "null" => Tok::Null,
            "and" => Tok::And,
            "or" => Tok::Or,
            "not" => Tok::Not,
            "is" => Tok::Is,
            _ => return None,
        })
    }

    /// How the token is written, for "expected ..." messages.
    pub fn describe(&self) -> String {
        match self {
            Tok::Newline => "end of line".into(),
            Tok::Indent => "indentation".into(),
            Tok::Dedent => "end of indented block".into(),
            Tok::Ident(s) => format!("`{s}`"),
            Tok::Int(i) => format!("`{i}`"),
            Tok::Float(f) => format!("`{f}`"),
            Tok::Str(_) => "string".into(),
            Tok::Discretion(_) => "discretion text".into(),
            other => format!("`{}`", other.text()),
        }
    }

    /// The fixed text of keyword and punctuation tokens.
    pub fn text(&self) -> &'static str {
        match self {
            Tok::Use => "use",
            Tok::Import => "import",
            Tok::From => "from",
            Tok::As => "as",
            Tok::Input => "input",
            Tok::Output => "output",
            Tok::Agent => "agent",
            Tok::Session => "session",
            Tok::Resume => "resume",
            Tok::Let => "let",
            Tok::Const => "const",
            Tok::Do => "do",
            Tok::Block => "block",
            Tok::Parallel => "parallel",
            Tok::For => "for",
            Tok::In => "in",
            Tok::Repeat => "repeat",
            Tok::Loop => "loop",
            Tok::Until => "until",
            Tok::While => "while",
            Tok::Try => "try",
            Tok::Catch => "catch",
            Tok::Finally => "finally",
            Tok::Throw => "throw",
            Tok::Assert => "assert",
            Tok::Choice => "choice",
            Tok::Option => "option",
            Tok::If => "if",
            Tok::Elif => "elif",
            Tok::Else => "else",
            Tok::True => "true",
            Tok::False => "false",
            Tok::Null => "null",
            Tok::And => "and",
            Tok::Or => "or",
            Tok::Not => "not",
            Tok::Is => "is",
            Tok::Colon => ":",
            Tok::Comma => ",",
            Tok::Dot => ".",
            Tok::LParen => "(",
            Tok::RParen => ")",
            Tok::LBracket => "[",
            Tok::RBracket => "]",
            Tok::LBrace => "{",
            Tok::RBrace => "}",
            Tok::Arrow => "->",
            Tok::Pipe => "|",
            Tok::Assign => "=",
            Tok::EqEq => "==",
            Tok::NotEq => "!=",
            Tok::Lt => "<",
            Tok::Le => "<=",
            Tok::Gt => ">",
            Tok::Ge => ">=",
            Tok::Plus => "+",
            Tok::Minus => "-",
            Tok::Newline | Tok::Indent | Tok::Dedent => "",
            Tok::Ident(_) | Tok::Int(_) | Tok::Float(_) | Tok::Str(_) | Tok::Discretion(_) => "",
        }
    }
}
