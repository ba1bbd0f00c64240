//! The layers design.md promises, held to the code: in every crate of the workspace no module
//! imports one that imports it back, and the interpreter's crate does no I/O.
//!
//! The source is read with `syn`, from each crate root (`src/lib.rs`, `src/main.rs`) along its
//! `mod` declarations. Every path a module names counts as an import of where the name is
//! defined: `use` trees, paths in code (`crate::x::f()`, `super::y::T`, `child::T`), and paths
//! inside macro invocations; a name re-exported (`pub use x::T`, `pub use x::*`, in a
//! `mod.rs` or at the crate root) counts as an import of the module that defines it. Test
//! code (`#[cfg(test)]`) is left out of the module graph: it does not ship.
//!
//! Modules are compared with their siblings: the top-level modules of a crate, the files of a
//! module's directory, the modules inline in a file. An import from `a::x` to `b::y` is an
//! arrow from `a` to `b` among the crate's top-level modules; one from `a::x` to `a::y` is an
//! arrow from `x` to `y` among `a`'s children. A parent and its own children are not siblings
//! (a `mod.rs` declares its files, and they use what it defines), so they are not compared.

use crate::markdown::root;
use crate::support;
use proc_macro2::{Spacing, TokenStream, TokenTree};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use syn::visit::Visit;

/// A module's path from its crate's root (empty for the root).
type ModPath = Vec<String>;

/// One module of a crate, as far as the module graph needs it.
#[derive(Default)]
struct Module {
    /// Its child modules.
    children: BTreeSet<String>,
    /// The names it defines (types, functions, constants, macros...).
    items: BTreeSet<String>,
    /// The words inside the macros it invokes at item level (which may define names that
    /// `syn` cannot see).
    macro_words: BTreeSet<String>,
    /// The names its `use` items bind, with the path as written.
    imports: BTreeMap<String, Vec<String>>,
    /// The paths its glob imports (`use x::*`) name, as written.
    globs: Vec<Vec<String>>,
}

/// A path named in a module, as written (`crate`, `super`, `self` and all).
struct Named {
    /// The module it is named in.
    module: ModPath,
    /// Its segments.
    path: Vec<String>,
    /// Where: the file and line.
    at: String,
}

/// A crate's modules and every path they name.
#[derive(Default)]
struct Crate {
    modules: BTreeMap<ModPath, Module>,
    named: Vec<Named>,
}

/// Deeper than this, a chain of re-exports is taken for a loop.
const MAX_HOPS: usize = 32;

impl Crate {
    /// Reads the crate whose root is `root_file`, with or without its test code.
    fn read(root_file: &Path, with_tests: bool) -> Crate {
        let mut krate = Crate::default();
        let dir = root_file
            .parent()
            .expect("a crate root is in src/")
            .to_path_buf();
        let mut queue: Vec<(ModPath, PathBuf, PathBuf)> =
            vec![(Vec::new(), root_file.to_path_buf(), dir)];
        while let Some((module, file, dir)) = queue.pop() {
            let text = std::fs::read_to_string(&file)
                .unwrap_or_else(|e| panic!("cannot read {}: {e}", file.display()));
            let parsed = syn::parse_file(&text)
                .unwrap_or_else(|e| panic!("cannot parse {}: {e}", file.display()));
            let mut reader = Reader {
                krate: &mut krate,
                module,
                dir,
                file: shown(&file),
                with_tests,
                in_body: 0,
                declared: Vec::new(),
            };
            reader.module_items(&parsed.items);
            for (child, dir) in reader.declared {
                let name = child.last().expect("a child has a name").clone();
                let flat = dir.join(format!("{name}.rs"));
                let (file, inner) = if flat.is_file() {
                    (flat, dir.join(&name))
                } else {
                    (dir.join(&name).join("mod.rs"), dir.join(&name))
                };
                queue.push((child, file, inner));
            }
        }
        krate
    }

    /// The path `path`, named in `module`, from the crate's root; `None` when it leads
    /// outside the crate (another crate, `std`, a local name).
    fn absolute(&self, module: &[String], path: &[String], hops: usize) -> Option<Vec<String>> {
        let (first, rest) = path.split_first()?;
        if hops > MAX_HOPS {
            return None;
        }
        match first.as_str() {
            "crate" => Some(rest.to_vec()),
            "self" => Some([module, rest].concat()),
            "super" => {
                let mut base = module.to_vec();
                let mut rest = path;
                while let Some(("super", tail)) =
                    rest.split_first().map(|(s, tail)| (s.as_str(), tail))
                {
                    base.pop()?;
                    rest = tail;
                }
                Some([base.as_slice(), rest].concat())
            }
            _ => {
                let m = self.modules.get(module)?;
                if m.children.contains(first) {
                    Some([module, path].concat())
                } else if let Some(target) = m.imports.get(first) {
                    let target = self.absolute(module, target, hops + 1)?;
                    Some([target.as_slice(), rest].concat())
                } else {
                    None
                }
            }
        }
    }

    /// The module that defines what `path` (from the root) names: followed through child
    /// modules, imports and glob imports.
    fn defining(&self, path: &[String], hops: usize) -> ModPath {
        let mut here: ModPath = Vec::new();
        for (i, segment) in path.iter().enumerate() {
            let Some(m) = self.modules.get(&here) else {
                return here;
            };
            if m.children.contains(segment) {
                here.push(segment.clone());
                continue;
            }
            if m.items.contains(segment) || hops > MAX_HOPS {
                return here;
            }
            if let Some(target) = m.imports.get(segment) {
                return match self.absolute(&here, target, 0) {
                    Some(t) => self.defining(&[t.as_slice(), &path[i + 1..]].concat(), hops + 1),
                    None => here,
                };
            }
            for glob in &m.globs {
                if let Some(g) = self.absolute(&here, glob, 0) {
                    let module = self.defining(&g, hops + 1);
                    if g.len() == module.len() && self.has(&module, segment, hops + 1) {
                        return self.defining(&[g.as_slice(), &path[i..]].concat(), hops + 1);
                    }
                }
            }
            return here;
        }
        here
    }

    /// Whether module `module` has a name `name` (its own, imported or through a glob).
    fn has(&self, module: &[String], name: &str, hops: usize) -> bool {
        let Some(m) = self.modules.get(module) else {
            return false;
        };
        if m.children.contains(name)
            || m.items.contains(name)
            || m.imports.contains_key(name)
            || m.macro_words.contains(name)
        {
            return true;
        }
        hops <= MAX_HOPS
            && m.globs.iter().any(|g| {
                self.absolute(module, g, 0)
                    .is_some_and(|g| self.has(&g, name, hops + 1))
            })
    }

    /// The arrows between siblings: for each parent, `from -> to -> [where]`.
    fn arrows(&self) -> BTreeMap<ModPath, BTreeMap<String, BTreeMap<String, Vec<String>>>> {
        let mut arrows: BTreeMap<ModPath, BTreeMap<String, BTreeMap<String, Vec<String>>>> =
            BTreeMap::new();
        for n in &self.named {
            let Some(path) = self.absolute(&n.module, &n.path, 0) else {
                continue;
            };
            let to = self.defining(&path, 0);
            let from = &n.module;
            let common = from.iter().zip(&to).take_while(|(a, b)| a == b).count();
            if common < from.len() && common < to.len() {
                arrows
                    .entry(from[..common].to_vec())
                    .or_default()
                    .entry(from[common].clone())
                    .or_default()
                    .entry(to[common].clone())
                    .or_default()
                    .push(format!("{}: {}", n.at, n.path.join("::")));
            }
        }
        arrows
    }

    /// Every circle among siblings, written out with what ties it.
    fn circles(&self) -> Vec<String> {
        let mut found = Vec::new();
        for (parent, graph) in self.arrows() {
            for (tied, circle) in circles(&graph) {
                let place = if parent.is_empty() {
                    "the crate's top-level modules".to_string()
                } else {
                    format!("the modules of `{}`", parent.join("::"))
                };
                let mut text = format!("among {place}: {}", circle.join(" -> "));
                if circle.len() < tied.len() + 1 {
                    text.push_str(&format!(
                        " (and more: {} import each other)",
                        tied.join(", ")
                    ));
                }
                for pair in circle.windows(2) {
                    for at in graph[&pair[0]][&pair[1]].iter().take(3) {
                        text.push_str(&format!("\n    {} -> {}: {at}", pair[0], pair[1]));
                    }
                }
                found.push(text);
            }
        }
        found
    }
}

/// Each set of two or more nodes of `graph` that reach each other, with one circle through
/// it: a path that ends where it starts.
fn circles(
    graph: &BTreeMap<String, BTreeMap<String, Vec<String>>>,
) -> Vec<(Vec<String>, Vec<String>)> {
    let next = |n: &String| -> Vec<&String> {
        graph
            .get(n)
            .map(|m| m.keys().filter(|k| *k != n).collect())
            .unwrap_or_default()
    };
    // Each node's reach, then the sets of nodes that reach each other.
    let nodes: BTreeSet<&String> = graph
        .iter()
        .flat_map(|(k, v)| std::iter::once(k).chain(v.keys()))
        .collect();
    let reach = |from: &String| -> BTreeSet<String> {
        let mut seen = BTreeSet::new();
        let mut todo = vec![from.clone()];
        while let Some(n) = todo.pop() {
            for m in next(&n) {
                if seen.insert(m.clone()) {
                    todo.push(m.clone());
                }
            }
        }
        seen
    };
    let reaches: BTreeMap<&String, BTreeSet<String>> =
        nodes.iter().map(|n| (*n, reach(n))).collect();
    let mut done: BTreeSet<String> = BTreeSet::new();
    let mut out = Vec::new();
    for n in &nodes {
        if done.contains(*n) || !reaches[n].contains(*n) {
            continue;
        }
        let set: BTreeSet<String> = reaches[n]
            .iter()
            .filter(|m| reaches[m].contains(*n))
            .cloned()
            .collect();
        done.extend(set.iter().cloned());
        // The shortest way from `n` back to itself, by breadth.
        let mut back: BTreeMap<String, String> = BTreeMap::new();
        let mut layer = vec![(*n).clone()];
        'search: while !layer.is_empty() {
            let mut following = Vec::new();
            for a in &layer {
                for b in next(a) {
                    if b == *n {
                        back.insert(String::new(), a.clone());
                        break 'search;
                    }
                    if set.contains(b) && !back.contains_key(b) {
                        back.insert(b.clone(), a.clone());
                        following.push(b.clone());
                    }
                }
            }
            layer = following;
        }
        let mut circle = vec![(*n).clone()];
        let mut at = back[""].clone();
        while at != **n {
            circle.push(at.clone());
            at = back[&at].clone();
        }
        circle.push((*n).clone());
        circle.reverse();
        out.push((set.into_iter().collect(), circle));
    }
    out
}

/// A path as the messages show it: from the repository's root.
fn shown(path: &Path) -> String {
    path.strip_prefix(root())
        .unwrap_or(path)
        .display()
        .to_string()
}

/// Whether `attrs` hold `#[cfg(test)]`.
fn test_only(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|a| {
        a.path().is_ident("cfg")
            && matches!(&a.meta, syn::Meta::List(l) if l.tokens.to_string() == "test")
    })
}

/// Reads one file of a crate.
struct Reader<'a> {
    krate: &'a mut Crate,
    /// The module being read.
    module: ModPath,
    /// Where its file modules are.
    dir: PathBuf,
    /// The file, as shown.
    file: String,
    /// Whether test code is read.
    with_tests: bool,
    /// How deep inside function bodies (where items are not the module's).
    in_body: usize,
    /// Modules declared in this file without a body: their path and the directory of
    /// their file.
    declared: Vec<(ModPath, PathBuf)>,
}

impl Reader<'_> {
    fn here(&mut self) -> &mut Module {
        self.krate.modules.entry(self.module.clone()).or_default()
    }

    fn name(&mut self, path: Vec<String>, line: usize) {
        if path.len() >= 2 {
            self.krate.named.push(Named {
                module: self.module.clone(),
                path,
                at: format!("{}:{line}", self.file),
            });
        }
    }

    /// A module's items: what they define, then what they name.
    fn module_items(&mut self, items: &[syn::Item]) {
        self.here();
        for item in items {
            self.visit_item(item);
        }
    }

    /// The names a use tree binds or globs, each with its path.
    fn use_tree(&mut self, prefix: &mut Vec<String>, tree: &syn::UseTree) {
        let line = |i: &syn::Ident| i.span().start().line;
        match tree {
            syn::UseTree::Path(p) => {
                prefix.push(p.ident.to_string());
                self.use_tree(prefix, &p.tree);
                prefix.pop();
            }
            syn::UseTree::Name(n) => {
                let (path, binds) = if n.ident == "self" {
                    (prefix.clone(), prefix.last().cloned())
                } else {
                    let mut p = prefix.clone();
                    p.push(n.ident.to_string());
                    (p, Some(n.ident.to_string()))
                };
                self.import(path, binds, line(&n.ident));
            }
            syn::UseTree::Rename(r) => {
                let mut path = prefix.clone();
                if r.ident != "self" {
                    path.push(r.ident.to_string());
                }
                let binds = (r.rename != "_").then(|| r.rename.to_string());
                self.import(path, binds, line(&r.ident));
            }
            syn::UseTree::Glob(g) => {
                if self.in_body == 0 {
                    let glob = prefix.clone();
                    self.here().globs.push(glob);
                }
                self.name_glob(prefix.clone(), g.star_token.span.start().line);
            }
            syn::UseTree::Group(g) => {
                for t in &g.items {
                    self.use_tree(prefix, t);
                }
            }
        }
    }

    fn name_glob(&mut self, path: Vec<String>, line: usize) {
        // `use x::*` names module `x` itself; so does a one-segment glob of a child.
        let mut path = path;
        if path.len() == 1 {
            path.insert(0, "self".into());
        }
        self.name(path, line);
    }

    fn import(&mut self, path: Vec<String>, binds: Option<String>, line: usize) {
        if let (Some(name), 0) = (binds, self.in_body) {
            self.here().imports.insert(name, path.clone());
        }
        let path = if path.len() == 1 {
            // `use child;` names the child.
            vec!["self".into(), path[0].clone()]
        } else {
            path
        };
        self.name(path, line);
    }

    /// Every `a::b::c` in a macro's tokens.
    fn tokens(&mut self, tokens: TokenStream) {
        let tokens: Vec<TokenTree> = tokens.into_iter().collect();
        let mut i = 0;
        while i < tokens.len() {
            match &tokens[i] {
                TokenTree::Group(g) => {
                    self.tokens(g.stream());
                    i += 1;
                }
                TokenTree::Ident(first) => {
                    let line = first.span().start().line;
                    let mut path = vec![first.to_string()];
                    let mut j = i + 1;
                    while let (
                        Some(TokenTree::Punct(a)),
                        Some(TokenTree::Punct(b)),
                        Some(TokenTree::Ident(next)),
                    ) = (tokens.get(j), tokens.get(j + 1), tokens.get(j + 2))
                    {
                        if a.as_char() != ':' || a.spacing() != Spacing::Joint || b.as_char() != ':'
                        {
                            break;
                        }
                        path.push(next.to_string());
                        j += 3;
                    }
                    self.name(path, line);
                    i = j;
                }
                TokenTree::Punct(_) | TokenTree::Literal(_) => i += 1,
            }
        }
    }

    /// The words of an item-level macro invocation.
    fn words(tokens: TokenStream, into: &mut BTreeSet<String>) {
        for t in tokens {
            match t {
                TokenTree::Ident(i) => {
                    into.insert(i.to_string());
                }
                TokenTree::Group(g) => Reader::words(g.stream(), into),
                _ => {}
            }
        }
    }
}

/// The name an item defines in its module.
fn defines(item: &syn::Item) -> Option<String> {
    let ident = match item {
        syn::Item::Const(i) => &i.ident,
        syn::Item::Enum(i) => &i.ident,
        syn::Item::Fn(i) => &i.sig.ident,
        syn::Item::Static(i) => &i.ident,
        syn::Item::Struct(i) => &i.ident,
        syn::Item::Trait(i) => &i.ident,
        syn::Item::TraitAlias(i) => &i.ident,
        syn::Item::Type(i) => &i.ident,
        syn::Item::Union(i) => &i.ident,
        syn::Item::Macro(i) => i.ident.as_ref()?,
        _ => return None,
    };
    Some(ident.to_string())
}

fn attrs_of(item: &syn::Item) -> &[syn::Attribute] {
    match item {
        syn::Item::Const(i) => &i.attrs,
        syn::Item::Enum(i) => &i.attrs,
        syn::Item::ExternCrate(i) => &i.attrs,
        syn::Item::Fn(i) => &i.attrs,
        syn::Item::ForeignMod(i) => &i.attrs,
        syn::Item::Impl(i) => &i.attrs,
        syn::Item::Macro(i) => &i.attrs,
        syn::Item::Mod(i) => &i.attrs,
        syn::Item::Static(i) => &i.attrs,
        syn::Item::Struct(i) => &i.attrs,
        syn::Item::Trait(i) => &i.attrs,
        syn::Item::TraitAlias(i) => &i.attrs,
        syn::Item::Type(i) => &i.attrs,
        syn::Item::Union(i) => &i.attrs,
        syn::Item::Use(i) => &i.attrs,
        _ => &[],
    }
}

impl<'ast> Visit<'ast> for Reader<'_> {
    fn visit_item(&mut self, item: &'ast syn::Item) {
        if !self.with_tests && test_only(attrs_of(item)) {
            return;
        }
        if self.in_body == 0 {
            if let Some(name) = defines(item) {
                self.here().items.insert(name);
            }
            if let syn::Item::Macro(m) = item {
                if m.ident.is_none() {
                    let mut words = BTreeSet::new();
                    Reader::words(m.mac.tokens.clone(), &mut words);
                    self.here().macro_words.extend(words);
                }
            }
        }
        syn::visit::visit_item(self, item);
    }

    fn visit_item_mod(&mut self, m: &'ast syn::ItemMod) {
        let name = m.ident.to_string();
        self.here().children.insert(name.clone());
        let child = [self.module.as_slice(), std::slice::from_ref(&name)].concat();
        match &m.content {
            None => self.declared.push((child, self.dir.clone())),
            Some((_, items)) => {
                let outer = std::mem::replace(&mut self.module, child);
                let dir = self.dir.join(&name);
                let outer_dir = std::mem::replace(&mut self.dir, dir);
                let outer_body = std::mem::replace(&mut self.in_body, 0);
                self.module_items(items);
                self.module = outer;
                self.dir = outer_dir;
                self.in_body = outer_body;
            }
        }
    }

    fn visit_item_use(&mut self, u: &'ast syn::ItemUse) {
        let mut prefix = Vec::new();
        if u.leading_colon.is_some() {
            // `::std::fs`: another crate, never a module of this one.
            prefix.push(String::new());
        }
        self.use_tree(&mut prefix, &u.tree);
    }

    fn visit_path(&mut self, p: &'ast syn::Path) {
        let line = p
            .segments
            .first()
            .map_or(0, |s| s.ident.span().start().line);
        // `::std::fs`: another crate, never a module of this one.
        let outside = p.leading_colon.as_ref().map(|_| String::new());
        let path = outside
            .into_iter()
            .chain(p.segments.iter().map(|s| s.ident.to_string()))
            .collect();
        self.name(path, line);
        syn::visit::visit_path(self, p);
    }

    fn visit_macro(&mut self, m: &'ast syn::Macro) {
        syn::visit::visit_macro(self, m);
        self.tokens(m.tokens.clone());
    }

    fn visit_visibility(&mut self, _: &'ast syn::Visibility) {
        // `pub(in crate::x)` says who may see an item, not what it uses.
    }

    fn visit_block(&mut self, b: &'ast syn::Block) {
        self.in_body += 1;
        syn::visit::visit_block(self, b);
        self.in_body -= 1;
    }
}

/// The crate roots of the workspace's members.
fn crate_roots() -> Vec<PathBuf> {
    let manifest: toml::Table = std::fs::read_to_string(root().join("Cargo.toml"))
        .expect("Cargo.toml")
        .parse()
        .expect("a manifest");
    let members = manifest["workspace"]["members"]
        .as_array()
        .expect("workspace members");
    members
        .iter()
        .filter_map(toml::Value::as_str)
        .flat_map(|dir| ["src/lib.rs", "src/main.rs"].map(|f| root().join(dir).join(f)))
        .filter(|p| p.is_file())
        .collect()
}

/// The circles among sibling modules of the crate rooted at `file`.
fn circles_of(file: &Path) -> Vec<String> {
    Crate::read(file, false).circles()
}

#[test]
fn no_module_imports_one_that_imports_it_back() {
    let mut failures = Vec::new();
    let mut modules = 0;
    for file in crate_roots() {
        let krate = Crate::read(&file, false);
        modules += krate.modules.len();
        for circle in krate.circles() {
            failures.push(format!("{}: {circle}", shown(&file)));
        }
    }
    assert!(modules > 200, "only {modules} modules read");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The check itself finds circles: through a re-export at the root, through a directory's
/// `mod.rs`, inside a macro; and leaves test code and parent-child pairs alone.
#[test]
fn the_circle_check_finds_what_it_should() {
    let dir = support::scratch("docs-layers-circles");
    let src = dir.join("src");
    let files = [
        (
            "lib.rs",
            "mod a;\nmod b;\nmod c;\nmod d;\nmod e;\nmod f;\nmod g;\npub use b::Thing;\n",
        ),
        ("a.rs", "use crate::Thing;\npub fn g() {}\n"),
        ("b.rs", "pub struct Thing;\nfn f() { super::a::g() }\n"),
        (
            "c/mod.rs",
            "mod x;\nmod y;\npub use y::*;\npub struct Parent;\n",
        ),
        ("c/x.rs", "pub struct X(super::Y, super::Parent);\n"),
        ("c/y.rs", "pub struct Y;\nfn f(_: super::x::X) {}\n"),
        (
            "d.rs",
            "pub struct D;\n#[cfg(test)]\nmod tests {\n    use crate::e::E;\n}\n",
        ),
        (
            "e.rs",
            "pub struct E(crate::d::D);\nfn f() -> crate::c::Parent { crate::c::Parent }\n",
        ),
        ("f.rs", "pub fn f() { println!(\"{}\", crate::g::G); }\n"),
        ("g.rs", "pub const G: u8 = 1;\nuse super::f;\n"),
    ];
    for (name, text) in files {
        let path = src.join(name);
        std::fs::create_dir_all(path.parent().expect("a directory")).expect("mkdir");
        std::fs::write(&path, text).expect("write");
    }
    let found = circles_of(&src.join("lib.rs"));
    let firsts: Vec<&str> = found
        .iter()
        .map(|c| c.lines().next().unwrap_or_default())
        .collect();
    assert_eq!(
        firsts,
        [
            "among the crate's top-level modules: a -> b -> a",
            "among the crate's top-level modules: f -> g -> f",
            "among the modules of `c`: x -> y -> x",
        ],
        "{found:#?}"
    );
    assert!(
        found[0].contains("a -> b: ") && found[0].contains("a.rs:1: crate::Thing"),
        "{found:#?}"
    );
}

/// Paths into the standard library's I/O, which prose-machine must not name.
fn does_io(path: &[String]) -> bool {
    let io = |s: &String| ["fs", "net", "process"].contains(&s.as_str());
    let path = match path.first().map(String::as_str) {
        Some("") => &path[1..],
        _ => path,
    };
    match path {
        [std, second, ..] if std == "std" && io(second) => true,
        [std, os, rest @ ..] if std == "std" && os == "os" => rest.iter().any(io),
        _ => false,
    }
}

#[test]
fn the_machine_names_no_file_network_or_process() {
    let machine = root().join("vm/machine/src/lib.rs");
    let krate = Crate::read(&machine, true);
    assert!(
        krate.named.len() > 1000,
        "only {} paths read",
        krate.named.len()
    );
    let found: Vec<String> = krate
        .named
        .iter()
        .filter(|n| does_io(&n.path))
        .map(|n| format!("{}: {}", n.at, n.path.join("::")))
        .collect();
    assert!(
        found.is_empty(),
        "prose-machine does I/O, which design.md says it never does:\n{}",
        found.join("\n")
    );
    // The check sees what it looks for.
    for (path, io) in [
        ("std::fs::read", true),
        ("::std::net::TcpStream", true),
        ("std::process", true),
        ("std::os::unix::fs::PermissionsExt", true),
        ("std::io::Write", false),
        ("crate::fs::x", false),
    ] {
        let segments: Vec<String> = path.split("::").map(str::to_string).collect();
        assert_eq!(does_io(&segments), io, "{path}");
    }
}

/// The crates prose-machine is built with, through every normal dependency (as `cargo tree
/// -e normal` lists them for this platform): none of them is an async runtime, a network
/// client or server, a database client or a process spawner.
#[test]
fn the_machine_is_built_with_nothing_that_does_io() {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let out = std::process::Command::new(cargo)
        .args(["tree", "--locked", "-p", "prose-machine", "-e", "normal"])
        .args(["--prefix", "none", "--format", "{p}"])
        .current_dir(root())
        .output()
        .expect("run cargo tree");
    let listing = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "cargo tree: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let crates: BTreeSet<&str> = listing
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    assert!(
        crates.contains("prose-machine") && crates.contains("bytecode-spec"),
        "{listing}"
    );
    // libc is among them, through bytecode-spec's minisign (getrandom for new keys, and
    // rpassword for their passwords): bindings the machine never calls, as the scan of its
    // source checks. The runtimes, clients and servers that do I/O are not.
    let io: Vec<&&str> = crate::facts::IO_CRATES
        .iter()
        .filter(|c| **c != "libc" && crates.contains(**c))
        .collect();
    assert!(
        io.is_empty(),
        "prose-machine is built with {io:?}, which do I/O:\n{listing}"
    );
}
