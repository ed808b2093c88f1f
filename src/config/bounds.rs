//! Limits on a config's YAML, checked in one pass over the parser's events before anything is
//! built from it. Aliases are the danger: each one stands for a copy of the node it names, so
//! a few kilobytes of nested aliases expand to millions of values in every later parse (the
//! syntax check, the line index, serde), and deep nesting makes the YAML scanner itself slow
//! (it rescans every open flow level for each token). Here nothing is expanded: each node's
//! size counts its aliases as the nodes they stand for, and the pass stops at the first limit
//! crossed, at the line where it was crossed, having held only a stack of open collections and
//! the size of each anchor.

use std::collections::HashMap;
use std::mem::MaybeUninit;

use unsafe_libyaml_norway as unsafe_yaml;

use super::check::ConfigIssue;

/// The largest config file read: real ones are a few KiB, 10,000 targets about 1 MB.
pub const MAX_CONFIG_BYTES: usize = 2 << 20;
/// Collections nested in each other (real configs: under 10).
pub const MAX_DEPTH: usize = 64;
/// Alias nodes (`*name`) in the file.
pub const MAX_ALIASES: usize = 10_000;
/// Nodes (scalars and collections) of the document with every alias expanded: about what
/// the parses after this one build (10,000 targets of four fields are about 100,000).
pub const MAX_NODES: u64 = 250_000;

/// The first limit `text` crosses, as an issue for the whole file with the line where it was
/// crossed; a YAML syntax error is left to the parse that reports it.
pub fn check(text: &str) -> Result<(), ConfigIssue> {
    if text.len() > MAX_CONFIG_BYTES {
        return Err(too_large(text.len()));
    }
    let mut parser = Parser::new(text);
    let mut walk = Walk::default();
    loop {
        let Some((event, line)) = parser.next() else { return Ok(()) };
        let fail = |message: String| Err(ConfigIssue { path: String::new(), line: Some(line), message });
        match walk.step(event) {
            Ok(true) => {}
            Ok(false) => return Ok(()),
            Err(Crossed::Depth) => return fail(format!("collections nested more than {MAX_DEPTH} deep")),
            Err(Crossed::Aliases) => return fail(format!("more than {MAX_ALIASES} aliases (*name)")),
            Err(Crossed::Nodes) => return fail(format!("more than {MAX_NODES} values once aliases are expanded")),
        }
    }
}

/// The error for a file over `MAX_CONFIG_BYTES`.
pub fn too_large(len: usize) -> ConfigIssue {
    ConfigIssue { path: String::new(), line: None, message: format!("the file has {len} bytes or more; a config may have at most {MAX_CONFIG_BYTES} (2 MiB)") }
}

/// What one event of the stream is, for counting.
enum Event {
    /// A scalar, or the start of a collection, with its anchor.
    Node {
        collection: bool,
        anchor: Option<Vec<u8>>,
    },
    /// The end of a collection.
    End,
    Alias(Vec<u8>),
    /// Stream and document boundaries.
    Other,
    StreamEnd,
}

enum Crossed {
    Depth,
    Aliases,
    Nodes,
}

/// The running count: open collections (their anchors and sizes so far), each anchor's size,
/// the aliases seen and the nodes of the expanded document.
#[derive(Default)]
struct Walk {
    open: Vec<(Option<Vec<u8>>, u64)>,
    anchors: HashMap<Vec<u8>, u64>,
    aliases: usize,
    nodes: u64,
}

impl Walk {
    /// Takes one event; `Ok(false)` at the end of the stream.
    fn step(&mut self, event: Event) -> Result<bool, Crossed> {
        let size = match event {
            Event::StreamEnd => return Ok(false),
            Event::Other => return Ok(true),
            Event::Node { collection: true, anchor } => {
                if self.open.len() >= MAX_DEPTH {
                    return Err(Crossed::Depth);
                }
                self.open.push((anchor, 1));
                return self.add(1);
            }
            Event::Node { collection: false, anchor } => {
                if let Some(anchor) = anchor {
                    self.anchors.insert(anchor, 1);
                }
                1
            }
            Event::End => {
                let Some((anchor, size)) = self.open.pop() else { return Ok(true) };
                if let Some(anchor) = anchor {
                    self.anchors.insert(anchor, size);
                }
                // Its nodes were counted as they came; its parent grows by all of them.
                if let Some((_, parent)) = self.open.last_mut() {
                    *parent = parent.saturating_add(size);
                }
                return Ok(true);
            }
            Event::Alias(name) => {
                self.aliases += 1;
                if self.aliases > MAX_ALIASES {
                    return Err(Crossed::Aliases);
                }
                // An unknown anchor is the parse's error to report; count it as one node.
                self.anchors.get(&name).copied().unwrap_or(1)
            }
        };
        if let Some((_, parent)) = self.open.last_mut() {
            *parent = parent.saturating_add(size);
        }
        self.add(size)
    }

    fn add(&mut self, nodes: u64) -> Result<bool, Crossed> {
        self.nodes = self.nodes.saturating_add(nodes);
        if self.nodes > MAX_NODES { Err(Crossed::Nodes) } else { Ok(true) }
    }
}

/// libyaml's event parser over a borrowed text (the parser the config is read with).
struct Parser<'a> {
    /// Boxed: the parser keeps pointers into itself, so it never moves.
    sys: Box<MaybeUninit<unsafe_yaml::yaml_parser_t>>,
    _input: &'a str,
    done: bool,
}

impl<'a> Parser<'a> {
    fn new(input: &'a str) -> Parser<'a> {
        let mut sys = Box::new(MaybeUninit::<unsafe_yaml::yaml_parser_t>::uninit());
        // SAFETY: `initialize` fills the parser it is given; the input outlives the parser
        // (`_input` borrows it), and the parser is deleted once, in `drop`.
        unsafe {
            let parser = sys.as_mut_ptr();
            let ok = !unsafe_yaml::yaml_parser_initialize(parser).fail;
            assert!(ok, "YAML parser: out of memory");
            unsafe_yaml::yaml_parser_set_encoding(parser, unsafe_yaml::YAML_UTF8_ENCODING);
            unsafe_yaml::yaml_parser_set_input_string(parser, input.as_ptr(), input.len() as u64);
        }
        Parser { sys, _input: input, done: false }
    }

    /// The next event and its 1-based line; `None` at the end of the stream or at a syntax
    /// error (left to the real parse to report).
    fn next(&mut self) -> Option<(Event, usize)> {
        if self.done {
            return None;
        }
        let mut event = MaybeUninit::<unsafe_yaml::yaml_event_t>::uninit();
        // SAFETY: the parser was initialised in `new`; an event that `parse` filled is read
        // through the union member its type names, then deleted once.
        unsafe {
            let parser = self.sys.as_mut_ptr();
            // After a failure `done` is set, so `parse` is never called on a failed parser.
            if unsafe_yaml::yaml_parser_parse(parser, event.as_mut_ptr()).fail {
                self.done = true;
                return None;
            }
            let e = &*event.as_ptr();
            let line = e.start_mark.line as usize + 1;
            let converted = match e.type_ {
                unsafe_yaml::YAML_STREAM_END_EVENT => Event::StreamEnd,
                unsafe_yaml::YAML_ALIAS_EVENT => Event::Alias(c_bytes(e.data.alias.anchor).unwrap_or_default()),
                unsafe_yaml::YAML_SCALAR_EVENT => Event::Node { collection: false, anchor: c_bytes(e.data.scalar.anchor) },
                unsafe_yaml::YAML_SEQUENCE_START_EVENT => Event::Node { collection: true, anchor: c_bytes(e.data.sequence_start.anchor) },
                unsafe_yaml::YAML_MAPPING_START_EVENT => Event::Node { collection: true, anchor: c_bytes(e.data.mapping_start.anchor) },
                unsafe_yaml::YAML_SEQUENCE_END_EVENT | unsafe_yaml::YAML_MAPPING_END_EVENT => Event::End,
                _ => Event::Other,
            };
            unsafe_yaml::yaml_event_delete(event.as_mut_ptr());
            if matches!(converted, Event::StreamEnd) {
                self.done = true;
            }
            Some((converted, line))
        }
    }
}

/// The bytes of a NUL-terminated string libyaml owns (`None` for a null pointer).
///
/// # Safety
/// `ptr` is null or points at a NUL-terminated string valid for this call.
unsafe fn c_bytes(ptr: *const u8) -> Option<Vec<u8>> {
    if ptr.is_null() {
        return None;
    }
    // SAFETY: as the function's contract says.
    Some(unsafe { std::ffi::CStr::from_ptr(ptr.cast()) }.to_bytes().to_vec())
}

impl Drop for Parser<'_> {
    fn drop(&mut self) {
        // SAFETY: initialised in `new`, deleted only here.
        unsafe { unsafe_yaml::yaml_parser_delete(self.sys.as_mut_ptr()) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn crossed(text: &str) -> Option<String> {
        check(text).err().map(|i| format!("{} (line {})", i.message, i.line.unwrap_or(0)))
    }

    #[test]
    fn ordinary_configs_and_modest_aliases_pass() {
        assert_eq!(crossed("targets:\n  - {name: a, base_url: 'http://x', api: openai-chat}\n"), None);
        assert_eq!(crossed("base: &b {api: openai-chat, timeouts: {ttft: 1s}}\nt: [*b, *b, *b]\n"), None);
        assert_eq!(crossed(""), None);
        assert_eq!(crossed("[unclosed"), None, "syntax errors are the parse's to report");
    }

    #[test]
    fn nested_aliases_are_refused_by_their_expanded_size_without_expanding_them() {
        let mut text = format!("a0: &a0 [{}]\n", vec!["1"; 100].join(","));
        for level in 1..=6 {
            text.push_str(&format!("a{level}: &a{level} [{}]\n", vec![format!("*a{}", level - 1); 100].join(",")));
        }
        let got = crossed(&text).expect("refused");
        assert!(got.contains("values once aliases are expanded") && got.contains("(line 3)"), "{got}");
    }

    #[test]
    fn many_aliases_and_deep_nesting_are_refused_at_their_line() {
        let text = format!("s: &s {{name: x}}\nscenarios:\n{}", "  - *s\n".repeat(MAX_ALIASES + 1));
        assert!(crossed(&text).unwrap().starts_with(&format!("more than {MAX_ALIASES} aliases")));
        let deep = format!("targets: {}{}\n", "[".repeat(100_000), "]".repeat(100_000));
        assert_eq!(crossed(&deep).unwrap(), format!("collections nested more than {MAX_DEPTH} deep (line 1)"));
        let block = format!("targets:\n{}x\n", (0..100).map(|i| format!("{}-\n", " ".repeat(i * 2))).collect::<String>());
        assert!(crossed(&block).unwrap().starts_with("collections nested"), "block nesting too");
        assert!(crossed(&"x".repeat(MAX_CONFIG_BYTES + 1)).unwrap().contains("at most 2097152"));
    }

    #[test]
    fn many_plain_values_count_too() {
        let text = format!("v: [{}]\n", vec!["1"; MAX_NODES as usize + 1].join(","));
        assert!(crossed(&text).unwrap().starts_with("more than 250000 values"));
    }
}
