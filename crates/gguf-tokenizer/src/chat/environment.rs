//! The minijinja environment, configured like `transformers`' Jinja2 environment, with
//! Python's printing of values and its functions `raise_exception` and `strftime_now`.

use minijinja::value::ValueKind;
use minijinja::{
    AutoEscape, Environment, Error, ErrorKind, Output, State, UndefinedBehavior, Value,
};

use super::budget::{add_charged_filter, add_guarded_operations, charge, DEFAULT_MAX_INSTRUCTIONS};
use super::datetime::strftime_now;
use super::filters::*;
use super::methods::py_method;
use super::python::py_str;
use super::source::{FOR_ITERABLE, WHITESPACE};
use super::tojson::tojson;
use super::Raised;
use crate::pystr;

/// The engine configured like `transformers`' `ImmutableSandboxedEnvironment`.
pub(super) fn environment() -> Environment<'static> {
    let mut env = Environment::new();
    env.set_trim_blocks(WHITESPACE.trim_blocks);
    env.set_lstrip_blocks(WHITESPACE.lstrip_blocks);
    env.set_keep_trailing_newline(WHITESPACE.keep_trailing_newline);
    env.set_auto_escape_callback(|_| AutoEscape::None);
    env.set_undefined_behavior(UndefinedBehavior::Lenient);
    env.set_debug(false);
    env.set_formatter(format_value);
    env.set_unknown_method_callback(py_method);
    env.set_fuel(Some(DEFAULT_MAX_INSTRUCTIONS));
    add_guarded_operations(&mut env);
    // Every filter that returns a string or a list has it charged to the render: Jinja2's
    // versions where minijinja's differ, and minijinja's own.
    add_charged_filter(&mut env, "tojson", tojson);
    add_charged_filter(&mut env, "string", |v: &Value| Value::from(py_str(v)));
    add_charged_filter(&mut env, "join", join_filter);
    add_charged_filter(&mut env, "trim", trim_filter);
    add_charged_filter(&mut env, "replace", replace_filter);
    add_charged_filter(&mut env, "indent", indent_filter);
    add_charged_filter(&mut env, "format", format_filter);
    add_charged_filter(&mut env, "pprint", pprint_filter);
    add_charged_filter(&mut env, "title", |v: &Value| {
        Value::from(jinja_title(&py_str(v)))
    });
    add_charged_filter(&mut env, "capitalize", |v: &Value| {
        Value::from(pystr::capitalize(&py_str(v)))
    });
    env.add_filter("length", length_filter);
    env.add_filter("count", length_filter);
    env.add_filter("int", int_filter);
    env.add_filter("float", float_filter);
    // Jinja2's none is not iterable and its undefined iterates as empty (minijinja: both empty).
    add_charged_filter(&mut env, "items", items_filter);
    env.add_filter("first", first_filter);
    env.add_filter("last", last_filter);
    add_refusing_none(&mut env);
    {
        use minijinja::filters::*;
        add_charged_filter(&mut env, "lower", lower);
        add_charged_filter(&mut env, "upper", upper);
        add_charged_filter(&mut env, "escape", escape);
        add_charged_filter(&mut env, "e", escape);
        add_charged_filter(&mut env, "dictsort", dictsort);
        add_charged_filter(&mut env, "split", split);
        add_charged_filter(&mut env, "lines", lines);
        add_charged_filter(&mut env, "map", map);
        add_charged_filter(&mut env, "select", select);
        add_charged_filter(&mut env, "reject", reject);
        add_charged_filter(&mut env, "selectattr", selectattr);
        add_charged_filter(&mut env, "rejectattr", rejectattr);
        add_charged_filter(&mut env, "chain", chain);
        add_charged_filter(&mut env, "zip", zip);
    }
    env.add_filter(FOR_ITERABLE, for_iterable);
    env.add_test("iterable", iterable_test);
    env.add_test("in", in_test);
    env.add_test("sequence", |v: &Value| {
        matches!(
            v.kind(),
            ValueKind::Seq | ValueKind::Map | ValueKind::String | ValueKind::Undefined
        )
    });
    env.add_test("number", |v: &Value| {
        matches!(v.kind(), ValueKind::Number | ValueKind::Bool)
    });
    env.add_test("lower", |v: &Value| pystr::islower(&py_str(v)));
    env.add_test("upper", |v: &Value| pystr::isupper(&py_str(v)));
    env.add_function("raise_exception", raise_exception);
    env.add_function("strftime_now", strftime_now);
    env
}

pub(super) fn raise_exception(message: &Value) -> Result<Value, Error> {
    let message = py_str(message);
    Err(Error::new(ErrorKind::InvalidOperation, message.clone()).with_source(Raised(message)))
}

/// Prints values as Python's `str()` does: `None`, `True`, `[1, 'a']`, `{'k': 1.0}`, `1e-05`.
pub(super) fn format_value(out: &mut Output, state: &State, value: &Value) -> Result<(), Error> {
    let python = match value.kind() {
        ValueKind::Seq | ValueKind::Map | ValueKind::Iterable => true,
        ValueKind::Number => !value.is_integer(),
        _ => false,
    };
    // What a template writes is charged, to its output or into a captured block alike: its own
    // text comes here too, as string constants (see `guard_operations`).
    if python {
        let text = py_str(value);
        charge(text.len())?;
        out.write_str(&text)
            .map_err(|_| Error::new(ErrorKind::WriteFailure, "cannot write the output"))
    } else {
        charge(value.as_str().map_or(24, str::len))?;
        minijinja::escape_formatter(out, state, value)
    }
}
