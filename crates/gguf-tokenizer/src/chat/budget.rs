//! What one render may spend, and the guarded operations that spend it.
//!
//! minijinja bounds recursion, `range` and, with its fuel, the instructions a render runs, but
//! not the size of what a template builds: `{% set ns.s = ns.s ~ ns.s %}` forty times is a
//! terabyte, reached in a few hundred instructions. So [`super::source::guard_operations`]
//! rewrites every operation that can make a value larger than its operands into a call of one
//! of the functions here (`~`, `+`, `*`, slices, assignments to a namespace, the template's own
//! text), and the filters and methods that can grow charge what they build. A render then
//! holds a [`Spend`]:
//!
//! - every byte it writes, to its output or into a captured block (`{% set x %}…`, a macro's
//!   output), and every string or list an operation builds, is charged to the work budget
//!   ([`RenderLimits::max_work_bytes`]); what it can allocate is bounded by that budget and by
//!   the fuel (each instruction pushes a bounded value);
//! - no single value may be longer than the longest output ([`RenderLimits::max_output_bytes`]);
//! - a namespace may not hold itself, nor a value nested deeper than [`MAX_DEPTH`] (printing,
//!   comparing or dropping such a value would recurse without end).

use std::cell::Cell;
use std::sync::LazyLock;

use minijinja::value::{Rest, ValueKind};
use minijinja::{
    context, Environment, Error, ErrorKind, Expression, State, UndefinedBehavior, Value,
};

use super::python::py_str;
use super::MAX_DEPTH;

/// The instructions a render may run by default (minijinja's fuel). The real templates of the
/// tests spend 20 to 60 a message: this is a conversation of about a hundred thousand messages,
/// and a fraction of a second of work.
pub const DEFAULT_MAX_INSTRUCTIONS: u64 = 5_000_000;

/// The bytes charged for each item of a list a render builds (a value's own size; what the
/// items hold is shared, not copied).
const ITEM_BYTES: usize = 16;

/// Bounds on one render, see [`super::RenderOptions::limits`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RenderLimits {
    /// The longest prompt a render may produce, in bytes; also the longest string or list
    /// (counted at 16 bytes an item) it may build on the way.
    pub max_output_bytes: usize,
    /// The bytes of text and lists a render may build in all: its output, its captured blocks,
    /// and every string or list made by an operator, a filter or a method, each counted when
    /// made.
    pub max_work_bytes: usize,
    /// The instructions a render may run (minijinja's fuel): a loop that does not end, or ends
    /// after billions of steps, stops here.
    pub max_instructions: u64,
}

impl RenderLimits {
    /// Limits for a render whose output may be `max_output_bytes` long, with work for building
    /// it sixteen times over (and at least 64 MiB), and [`DEFAULT_MAX_INSTRUCTIONS`].
    pub fn for_output(max_output_bytes: usize) -> RenderLimits {
        RenderLimits {
            max_output_bytes,
            max_work_bytes: max_output_bytes.saturating_mul(16).max(64 << 20),
            max_instructions: DEFAULT_MAX_INSTRUCTIONS,
        }
    }
}

impl Default for RenderLimits {
    /// 16 MiB of output (about four million tokens), 256 MiB of work, 5 million instructions.
    fn default() -> RenderLimits {
        RenderLimits::for_output(16 << 20)
    }
}

/// Which bound a render went past.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Exceeded {
    Work,
    Value,
}

/// What the render under way on this thread has left.
#[derive(Clone, Copy, Debug)]
struct Spend {
    limits: RenderLimits,
    work_left: usize,
    exceeded: Option<Exceeded>,
}

thread_local! {
    static SPEND: Cell<Option<Spend>> = const { Cell::new(None) };
}

/// The budget of the render under way on this thread, from `start` until dropped (renders
/// run on the calling thread, one at a time).
pub(super) struct SpendGuard {
    previous: Option<Spend>,
}

impl SpendGuard {
    pub(super) fn start(limits: RenderLimits) -> SpendGuard {
        let spend = Spend {
            limits,
            work_left: limits.max_work_bytes,
            exceeded: None,
        };
        SpendGuard {
            previous: SPEND.replace(Some(spend)),
        }
    }

    /// The error of a bound the render went past where nothing could fail at once (a value
    /// printed by Python's `str()`, cut short when it grew too long).
    pub(super) fn exceeded(&self) -> Option<Error> {
        SPEND
            .get()
            .and_then(|s| s.exceeded.map(|e| exceeded_error(&s.limits, e)))
    }
}

impl Drop for SpendGuard {
    fn drop(&mut self) {
        SPEND.set(self.previous);
    }
}

fn exceeded_error(limits: &RenderLimits, what: Exceeded) -> Error {
    let message = match what {
        Exceeded::Work => format!(
            "the template built more than {} bytes of text and lists (a loop that grows a \
             string or a list without end?)",
            limits.max_work_bytes
        ),
        Exceeded::Value => format!(
            "the template built a string or list of more than {} bytes, longer than the \
             longest prompt allowed",
            limits.max_output_bytes
        ),
    };
    Error::new(ErrorKind::InvalidOperation, message)
}

/// Charges `bytes` the render is about to build (or has built) as one value: an error when
/// that value is longer than the output may be, or the work budget is spent. Outside a render
/// nothing is counted.
pub(super) fn charge(bytes: usize) -> Result<(), Error> {
    let Some(mut spend) = SPEND.get() else {
        return Ok(());
    };
    let failed = if let Some(e) = spend.exceeded {
        Some(e)
    } else if bytes > spend.limits.max_output_bytes {
        Some(Exceeded::Value)
    } else if bytes > spend.work_left {
        Some(Exceeded::Work)
    } else {
        spend.work_left -= bytes;
        None
    };
    spend.exceeded = failed;
    SPEND.set(Some(spend));
    match failed {
        Some(e) => Err(exceeded_error(&spend.limits, e)),
        None => Ok(()),
    }
}

/// An error when a value being built is already `len` bytes, longer than a value may be.
pub(super) fn check_len(len: usize) -> Result<(), Error> {
    if len > value_cap() {
        mark_too_long();
        return Err(SPEND.get().map_or_else(
            || Error::from(ErrorKind::InvalidOperation),
            |s| exceeded_error(&s.limits, Exceeded::Value),
        ));
    }
    Ok(())
}

/// The longest a value may be in the render under way (no limit outside a render).
pub(super) fn value_cap() -> usize {
    SPEND
        .get()
        .map_or(usize::MAX, |s| s.limits.max_output_bytes)
}

/// Records that a value which cannot fail where it is made (Python's `str()` of a list) went
/// past [`value_cap`] and was cut short: the render fails at its next charge or at its end.
pub(super) fn mark_too_long() {
    if let Some(mut spend) = SPEND.get() {
        spend.exceeded.get_or_insert(Exceeded::Value);
        SPEND.set(Some(spend));
    }
}

/// The bytes a value is charged: a string's length, a list's or map's items.
pub(super) fn size_of(value: &Value) -> usize {
    match value.kind() {
        ValueKind::String | ValueKind::Bytes => value.len().unwrap_or(0),
        ValueKind::Seq | ValueKind::Map | ValueKind::Iterable => {
            value.len().unwrap_or(0).saturating_mul(ITEM_BYTES)
        }
        _ => 0,
    }
}

/// Charges a value just built.
pub(super) fn charge_value(value: &Value) -> Result<(), Error> {
    charge(size_of(value))
}

/// Charges `items` list items about to be built.
pub(super) fn charge_items(items: usize) -> Result<(), Error> {
    charge(items.saturating_mul(ITEM_BYTES))
}

/// The functions the rewritten source calls, see [`super::source::guard_operations`].
pub(super) mod names {
    /// `a ~ b`.
    pub const CONCAT: &str = "__concat";
    /// `a + b`.
    pub const ADD: &str = "__add";
    /// `a * b`.
    pub const MUL: &str = "__mul";
    /// `v[start:stop:step]`.
    pub const SLICE: &str = "__slice";
    /// The value of `{% set ns.attr = value %}`: `__assign(ns, value)`.
    pub const ASSIGN: &str = "__assign";
    /// `[a, b]`.
    pub const LIST: &str = "__list";
    /// `{k: v}`: `__map(k, v)`.
    pub const MAP: &str = "__map";
    /// Every name the rewrite uses, which extra variables may not take.
    pub const ALL: [&str; 7] = [CONCAT, ADD, MUL, SLICE, ASSIGN, LIST, MAP];
}

/// Registers the guarded operations.
pub(super) fn add_guarded_operations(env: &mut Environment<'static>) {
    env.add_function(names::CONCAT, concat);
    env.add_function(names::ADD, add);
    env.add_function(names::MUL, mul);
    env.add_function(names::SLICE, slice);
    env.add_function(names::ASSIGN, assign);
    env.add_function(names::LIST, list);
    env.add_function(names::MAP, map);
    // minijinja's functions that build maps from their arguments, and none of its `debug`
    // (which prints the whole state, and which transformers' Jinja2 does not have).
    env.add_function("dict", |state: &State, args: Rest<Value>| {
        let out = Value::from_function(minijinja::functions::dict).call(state, &args)?;
        check_tree(&out)?;
        Ok::<Value, Error>(out)
    });
    env.add_function("namespace", |state: &State, args: Rest<Value>| {
        let out = Value::from_function(minijinja::functions::namespace).call(state, &args)?;
        check_tree(&out)?;
        Ok::<Value, Error>(out)
    });
    env.remove_global("debug");
}

/// `a ~ b` as Jinja2 computes it: `str(a) + str(b)`.
fn concat(a: &Value, b: &Value) -> Result<Value, Error> {
    let (a, b) = (py_str(a), py_str(b));
    charge(a.len().saturating_add(b.len()))?;
    Ok(Value::from(a + &b))
}

/// `a + b`, charged before it is built: two strings by their bytes, two lists by their items.
/// Two strings and two integers are added here as minijinja adds them (what templates add
/// most, at a fraction of the cost of evaluating the operator); the rest by minijinja itself.
fn add(a: &Value, b: &Value) -> Result<Value, Error> {
    if let (Some(x), Some(y)) = (a.as_str(), b.as_str()) {
        charge(x.len().saturating_add(y.len()))?;
        return Ok(Value::from([x, y].concat()));
    }
    if let (Some(x), Some(y)) = (small_int(a), small_int(b)) {
        let sum = i128::from(x) + i128::from(y);
        return Ok(i64::try_from(sum).map_or(Value::from(sum), Value::from));
    }
    let list = |v: &Value| matches!(v.kind(), ValueKind::Seq | ValueKind::Iterable);
    if list(a) && list(b) {
        charge(size_of(a).saturating_add(size_of(b)))?;
    }
    static ADD: LazyLock<Option<Expression<'static, 'static>>> = LazyLock::new(|| expr("a + b"));
    let out = eval(&ADD, context! { a, b })?;
    check_tree(&out)?;
    Ok(out)
}

/// An integer that fits an `i64` (not a bool, which minijinja adds as a number too).
fn small_int(v: &Value) -> Option<i64> {
    (v.kind() == ValueKind::Number && v.is_integer())
        .then(|| i64::try_from(v.clone()).ok())
        .flatten()
}

/// minijinja's longest string made by `*` (its `MAX_REPEATED_STRING_LEN`).
const MAX_REPEATED_STRING: usize = 100_000_000;

/// `a * b`: a string repeated is charged before it is built, and made here as minijinja makes
/// it; a list repeated (which minijinja makes lazily, but which `list`, `join` or `sort` would
/// then build whole) is charged for all its items; the rest by minijinja itself.
fn mul(a: &Value, b: &Value) -> Result<Value, Error> {
    let repeated = match (a.as_str(), b.as_str()) {
        (Some(s), None) => b.as_usize().map(|n| (s, n)),
        (None, Some(s)) => a.as_usize().map(|n| (s, n)),
        _ => None,
    };
    if let Some((s, n)) = repeated {
        let len = s.len().saturating_mul(n);
        charge(len)?;
        if len <= MAX_REPEATED_STRING {
            return Ok(Value::from(s.repeat(n)));
        }
    }
    let list = |v: &Value| matches!(v.kind(), ValueKind::Seq | ValueKind::Iterable);
    let repeated_list = match (list(a), list(b)) {
        (true, false) => b.as_usize().map(|n| (a, n)),
        (false, true) => a.as_usize().map(|n| (b, n)),
        _ => None,
    };
    if let Some((items, n)) = repeated_list {
        charge(size_of(items).saturating_mul(n))?;
    }
    static MUL: LazyLock<Option<Expression<'static, 'static>>> = LazyLock::new(|| expr("a * b"));
    let out = eval(&MUL, context! { a, b })?;
    check_tree(&out)?;
    Ok(out)
}

/// `v[start:stop:step]` (none for a bound left out), charged by what it copies.
fn slice(v: &Value, start: &Value, stop: &Value, step: &Value) -> Result<Value, Error> {
    static SLICE: LazyLock<Option<Expression<'static, 'static>>> =
        LazyLock::new(|| expr("v[start:stop:step]"));
    let out = eval(&SLICE, context! { v, start, stop, step })?;
    charge_value(&out)?;
    Ok(out)
}

/// The most values a list or map built by a render may hold, counted whole: an item is counted
/// each time it is reached, so a list holding another twice counts it twice. A list of two
/// copies of the list before, forty deep, takes forty lists of memory but is a trillion values
/// to print, compare or hash, which minijinja does by walking the whole tree.
pub const MAX_TREE_VALUES: usize = 1_000_000;

/// Walks the tree of `value` (the items of its lists and iterables, the keys and values of its
/// maps, each counted every time it is reached), calling `visit` on every value: an error past
/// [`MAX_TREE_VALUES`] values or [`MAX_DEPTH`] levels.
fn walk_tree(
    value: &Value,
    visit: &mut dyn FnMut(&Value) -> Result<(), Error>,
) -> Result<(), Error> {
    let container = |v: &Value| {
        matches!(
            v.kind(),
            ValueKind::Seq | ValueKind::Map | ValueKind::Iterable
        )
    };
    if !container(value) {
        return visit(value);
    }
    let mut left = MAX_TREE_VALUES;
    let mut stack = vec![(value.clone(), 0usize)];
    while let Some((v, depth)) = stack.pop() {
        visit(&v)?;
        if !container(&v) {
            continue;
        }
        if depth >= MAX_DEPTH {
            return Err(Error::new(
                ErrorKind::InvalidOperation,
                format!("the template built a value nested more than {MAX_DEPTH} levels deep"),
            ));
        }
        let items: Box<dyn Iterator<Item = Value>> = match v.kind() {
            ValueKind::Map => match v.as_object().and_then(|o| o.try_iter_pairs()) {
                Some(pairs) => Box::new(pairs.flat_map(|(k, v)| [k, v])),
                None => continue,
            },
            _ => match v.try_iter() {
                Ok(iter) => Box::new(iter),
                Err(_) => continue,
            },
        };
        for item in items {
            left = left.checked_sub(1).ok_or_else(|| {
                Error::new(
                    ErrorKind::InvalidOperation,
                    format!(
                        "the template built a value of more than {MAX_TREE_VALUES} values (a list \
                         or map holding the same one many times counts it each time)"
                    ),
                )
            })?;
            stack.push((item, depth + 1));
        }
    }
    Ok(())
}

/// An error when a list or map just built holds more than [`MAX_TREE_VALUES`] values counted
/// whole, or is nested more than [`MAX_DEPTH`] levels deep.
pub(super) fn check_tree(value: &Value) -> Result<(), Error> {
    walk_tree(value, &mut |_| Ok(()))
}

/// The value of `{% set target.attr = value %}`, refused when it holds `target` itself (a
/// namespace inside itself prints, compares and drops without end), or past
/// [`check_tree`]'s bounds.
fn assign(target: &Value, value: Value) -> Result<Value, Error> {
    if target.as_object().is_none() {
        return Ok(value);
    }
    walk_tree(&value, &mut |v| {
        if minijinja::tests::is_sameas(v, target) {
            return Err(Error::new(
                ErrorKind::InvalidOperation,
                "a namespace cannot hold itself",
            ));
        }
        Ok(())
    })?;
    Ok(value)
}

/// `[a, b, ...]` (a list literal with other than constants in it), bounded by [`check_tree`].
fn list(items: Rest<Value>) -> Result<Value, Error> {
    let out = Value::from(items.0);
    check_tree(&out)?;
    Ok(out)
}

/// `{k: v, ...}` (a map literal with other than constants in it, its keys and values in turn),
/// bounded by [`check_tree`].
fn map(items: Rest<Value>) -> Result<Value, Error> {
    let mut pairs = items.0.into_iter();
    let mut out = Vec::new();
    while let (Some(k), Some(v)) = (pairs.next(), pairs.next()) {
        out.push((k, v));
    }
    let out: Value = out.into_iter().collect();
    check_tree(&out)?;
    Ok(out)
}

/// The environment the guarded operators evaluate in: the operators do not depend on its
/// settings but for undefined values, which are lenient as in [`super::environment`].
fn expr(source: &'static str) -> Option<Expression<'static, 'static>> {
    static ENV: LazyLock<Environment<'static>> = LazyLock::new(|| {
        let mut env = Environment::new();
        env.set_undefined_behavior(UndefinedBehavior::Lenient);
        env
    });
    ENV.compile_expression(source).ok()
}

/// Evaluates one of the operators' expressions; its error keeps its kind and detail, not its
/// location (the template's line is added where the template called it).
fn eval(expression: &Option<Expression<'static, 'static>>, ctx: Value) -> Result<Value, Error> {
    let Some(expression) = expression else {
        return Err(Error::new(
            ErrorKind::InvalidOperation,
            "internal error: a guarded operator did not compile",
        ));
    };
    expression.eval(ctx).map_err(|e| match e.detail() {
        Some(detail) => Error::new(e.kind(), detail.to_string()),
        None => Error::from(e.kind()),
    })
}

/// Registers `filter` as `name`, its result charged to the render (each filter's own checks
/// come first: those that take a size argument charge it before building).
pub(super) fn add_charged_filter<F, Rv, Args>(
    env: &mut Environment<'static>,
    name: &'static str,
    f: F,
) where
    F: minijinja::functions::Function<Rv, Args>,
    Rv: minijinja::value::FunctionResult,
    Args: for<'a> minijinja::value::FunctionArgs<'a>,
{
    let inner = Value::from_function(f);
    env.add_filter(name, move |state: &State, args: Rest<Value>| {
        let out = inner.call(state, &args)?;
        charge_value(&out)?;
        check_tree(&out)?;
        Ok::<Value, Error>(out)
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The fast paths of `+` and `*` give what minijinja's own operators give, value and kind.
    #[test]
    fn fast_operators_equal_minijinja() {
        let values = [
            Value::from("ab"),
            Value::from(""),
            Value::from("é"),
            Value::from(3),
            Value::from(-7),
            Value::from(i64::MAX),
            Value::from(0),
            Value::from(true),
            Value::from(1.5),
            Value::from(vec![1, 2]),
            Value::from(()),
            Value::UNDEFINED,
        ];
        static ADD: LazyLock<Option<Expression<'static, 'static>>> =
            LazyLock::new(|| expr("a + b"));
        static MUL: LazyLock<Option<Expression<'static, 'static>>> =
            LazyLock::new(|| expr("a * b"));
        let is_list = |v: &Value| v.kind() == ValueKind::Seq;
        for a in &values {
            for b in &values {
                // Inside a render's budget, as the operators run: a list repeated i64::MAX
                // times is refused by it (minijinja's own would make it, lazily).
                let _spend = SpendGuard::start(RenderLimits::default());
                for (ours, theirs) in [
                    (add(a, b), eval(&ADD, context! { a, b })),
                    (mul(a, b), eval(&MUL, context! { a, b })),
                ] {
                    match (ours, theirs) {
                        (Err(x), Ok(_)) if is_list(a) || is_list(b) => {
                            assert!(x.to_string().contains("more than"), "{a:?} {b:?}: {x}");
                        }
                        (Ok(x), Ok(y)) => {
                            assert_eq!(x, y, "{a:?} {b:?}");
                            assert_eq!(x.kind(), y.kind(), "{a:?} {b:?}");
                            assert_eq!(x.is_integer(), y.is_integer(), "{a:?} {b:?}");
                        }
                        (Err(x), Err(y)) => assert_eq!(x.kind(), y.kind(), "{a:?} {b:?}"),
                        (x, y) => panic!("{a:?} {b:?}: {x:?} vs {y:?}"),
                    }
                }
            }
        }
    }
}
