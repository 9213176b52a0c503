//! Rewrites of a template's source before minijinja parses it: `transformers`'
//! `{% generation %}` tags and `{% for %}` iterables routed through a check that refuses none;
//! and walks over minijinja's syntax tree.

use minijinja::machinery::{self, ast, Span, Token, WhitespaceConfig};
use minijinja::syntax::SyntaxConfig;
use minijinja::Error;

use super::ENGINE_NAME;

/// Replaces `transformers`' `{% generation %}` / `{% endgeneration %}` tags, which only mark the
/// assistant's text for a training mask, by a block that renders its body the same way,
/// keeping the whitespace-control marks (and so the output) and the line numbers. Unlike
/// Jinja2's call block, the body shares the enclosing scope, so a `set` inside it is seen
/// after it; and the text `{% generation %}` is replaced inside `{% raw %}` blocks too.
pub(super) fn accept_generation_tags(source: &str) -> String {
    if !source.contains("generation") {
        return source.to_string();
    }
    let mut out = String::with_capacity(source.len() + 16);
    let mut rest = source;
    while let Some(start) = rest.find("{%") {
        out.push_str(&rest[..start]);
        let tag = &rest[start..];
        match parse_generation_tag(tag) {
            Some((len, left, end, right)) => {
                out.push_str("{%");
                out.push_str(left);
                out.push_str(if end { " endif " } else { " if true " });
                out.push_str(right);
                out.push_str("%}");
                rest = &tag[len..];
            }
            None => {
                out.push_str("{%");
                rest = &tag[2..];
            }
        }
    }
    out.push_str(rest);
    out
}

/// At `{%`: `(length, left mark, is end tag, right mark)` of a (end)generation tag.
pub(super) fn parse_generation_tag(tag: &str) -> Option<(usize, &str, bool, &str)> {
    let mut pos = 2;
    let mark = |s: &str| match s.as_bytes().first() {
        Some(b'-') => "-",
        Some(b'+') => "+",
        _ => "",
    };
    let left = mark(&tag[pos..]);
    pos += left.len();
    pos += tag[pos..].len() - tag[pos..].trim_start().len();
    let end = if tag[pos..].starts_with("endgeneration") {
        pos += "endgeneration".len();
        true
    } else if tag[pos..].starts_with("generation") {
        pos += "generation".len();
        false
    } else {
        return None;
    };
    let after = &tag[pos..];
    let trimmed = after.trim_start();
    if trimmed.len() == after.len() && !after.starts_with(['-', '+', '%']) {
        return None; // `{% generations ... %}` or similar: not this tag
    }
    pos += after.len() - trimmed.len();
    let right = mark(&tag[pos..]);
    pos += right.len();
    tag[pos..]
        .starts_with("%}")
        .then_some((pos + 2, left, end, right))
}

/// The filter every `for` loop's iterable goes through, see [`guard_for_loops`].
pub(super) const FOR_ITERABLE: &str = "__for_iterable";

/// Makes `{% for %}` refuse none as Jinja2 does (`TypeError: 'NoneType' object is not
/// iterable`): minijinja's loops iterate none as empty and offer no hook to change that. Each
/// loop's iterable is passed through the filter [`FOR_ITERABLE`]: `{% for x in EXPR if c %}`
/// becomes `{% for x in (EXPR)|__for_iterable if c %}`, on the same lines. minijinja's parser
/// says where the loops are and whether they have an `if` clause or `recursive`, its lexer where
/// their iterables start and end, and a second parse checks the result. A template this cannot
/// handle (a syntax error, which the engine then reports) is left as it is. The iterable of a
/// recursive loop's `loop(...)` call is not checked.
pub(super) fn guard_for_loops(source: String) -> String {
    if !source.contains("for") {
        return source;
    }
    let Ok(tree) = parse(&source) else {
        return source;
    };
    let mut loops = Vec::new();
    for_loops(&tree, &mut loops);
    if loops.is_empty() {
        return source;
    }
    let tokens: Vec<(Token<'_>, Span)> =
        match machinery::tokenize(&source, false, syntax(), WHITESPACE).collect() {
            Ok(tokens) => tokens,
            Err(_) => return source,
        };
    let Some(inserts) = iterable_bounds(&tokens, &loops) else {
        return source;
    };
    let mut out = String::with_capacity(source.len() + inserts.len() * 12);
    let mut copied = 0;
    for (start, end) in inserts {
        let (Some(before), Some(iterable)) = (source.get(copied..start), source.get(start..end))
        else {
            return source;
        };
        out.push_str(before);
        out.push('(');
        out.push_str(iterable);
        out.push_str(")|");
        out.push_str(FOR_ITERABLE);
        copied = end;
    }
    let Some(after) = source.get(copied..) else {
        return source;
    };
    out.push_str(after);

    // The same loops, each now iterating `(...)|__for_iterable`.
    let Ok(checked) = parse(&out) else {
        return source;
    };
    let mut guarded = Vec::new();
    for_loops(&checked, &mut guarded);
    let same = guarded.len() == loops.len()
        && guarded.iter().zip(&loops).all(|(new, old)| {
            new.recursive == old.recursive
                && new.filter_expr.is_some() == old.filter_expr.is_some()
                && matches!(&new.iter, ast::Expr::Filter(f)
                    if f.name == FOR_ITERABLE && f.args.is_empty() && f.expr.is_some())
        });
    if same {
        out
    } else {
        source
    }
}

/// The whitespace settings of [`environment`], for minijinja's parser and lexer.
pub(super) const WHITESPACE: WhitespaceConfig = WhitespaceConfig {
    keep_trailing_newline: false,
    lstrip_blocks: true,
    trim_blocks: true,
};

pub(super) fn parse(source: &str) -> Result<ast::Stmt<'_>, Error> {
    machinery::parse(source, ENGINE_NAME, syntax(), WHITESPACE)
}

/// The default delimiters: a unit struct unless minijinja's `custom_syntax` feature is on.
#[allow(clippy::default_constructed_unit_structs)]
pub(super) fn syntax() -> SyntaxConfig {
    SyntaxConfig::default()
}

/// The `for` loops of a template, in source order.
pub(super) fn for_loops<'t, 's>(stmt: &'t ast::Stmt<'s>, out: &mut Vec<&'t ast::ForLoop<'s>>) {
    walk_stmts(stmt, &mut |s| {
        if let ast::Stmt::ForLoop(f) = s {
            out.push(f);
        }
    });
}

/// The byte ranges of the loops' iterables: in `{% for TARGET in ITERABLE [if ...] [recursive]
/// %}`, the tokens after the first `in` outside brackets (a target holds none), up to the first
/// `if` outside brackets when the loop has that clause (an iterable cannot hold one), or the
/// final `recursive` of a recursive loop. `None` when the tokens do not match the loops.
pub(super) fn iterable_bounds(
    tokens: &[(Token<'_>, Span)],
    loops: &[&ast::ForLoop<'_>],
) -> Option<Vec<(usize, usize)>> {
    let mut bounds = Vec::with_capacity(loops.len());
    let mut loops = loops.iter();
    let mut rest = tokens;
    while let Some(at) = rest
        .windows(2)
        .position(|w| matches!((&w[0].0, &w[1].0), (Token::BlockStart, Token::Ident("for"))))
    {
        let the_loop = loops.next()?;
        let after = &rest[at + 2..];
        let header = &after[..after
            .iter()
            .position(|(t, _)| matches!(t, Token::BlockEnd))?];
        rest = &after[header.len()..];
        let mut depth = 0usize;
        let mut top_level = Vec::new();
        for (i, (token, _)) in header.iter().enumerate() {
            match token {
                Token::ParenOpen | Token::BracketOpen | Token::BraceOpen => depth += 1,
                Token::ParenClose | Token::BracketClose | Token::BraceClose => {
                    depth = depth.checked_sub(1)?
                }
                _ if depth == 0 => top_level.push(i),
                _ => {}
            }
        }
        let keyword = |word: &str, i: &usize| matches!(header[*i].0, Token::Ident(w) if w == word);
        let first = 1 + *top_level.iter().find(|i| keyword("in", i))?;
        let mut end = header.len();
        if the_loop.recursive {
            end = end
                .checked_sub(1)
                .filter(|last| keyword("recursive", last))?;
        }
        if the_loop.filter_expr.is_some() {
            end = *top_level
                .iter()
                .find(|&&i| i > first && i < end && keyword("if", &i))?;
        }
        if end <= first {
            return None;
        }
        bounds.push((
            header[first].1.start_offset as usize,
            header[end - 1].1.end_offset as usize,
        ));
    }
    loops.next().is_none().then_some(bounds)
}

/// Calls `f` on a statement and on every statement inside it, in source order.
pub(super) fn walk_stmts<'t, 's>(stmt: &'t ast::Stmt<'s>, f: &mut dyn FnMut(&'t ast::Stmt<'s>)) {
    f(stmt);
    let mut all = |body: &'t [ast::Stmt<'s>]| body.iter().for_each(|s| walk_stmts(s, f));
    match stmt {
        ast::Stmt::Template(t) => all(&t.children),
        ast::Stmt::ForLoop(l) => {
            all(&l.body);
            all(&l.else_body);
        }
        ast::Stmt::IfCond(c) => {
            all(&c.true_body);
            all(&c.false_body);
        }
        ast::Stmt::WithBlock(w) => all(&w.body),
        ast::Stmt::SetBlock(s) => all(&s.body),
        ast::Stmt::AutoEscape(a) => all(&a.body),
        ast::Stmt::FilterBlock(b) => all(&b.body),
        ast::Stmt::Block(b) => all(&b.body),
        ast::Stmt::Macro(m) => all(&m.body),
        ast::Stmt::CallBlock(c) => all(&c.macro_decl.body),
        ast::Stmt::EmitExpr(_)
        | ast::Stmt::EmitRaw(_)
        | ast::Stmt::Set(_)
        | ast::Stmt::Import(_)
        | ast::Stmt::FromImport(_)
        | ast::Stmt::Extends(_)
        | ast::Stmt::Include(_)
        | ast::Stmt::Continue(_)
        | ast::Stmt::Break(_)
        | ast::Stmt::Do(_) => {}
    }
}

/// Calls `f` on each expression a statement holds itself (not those of the statements in
/// its body).
pub(super) fn stmt_exprs<'t, 's>(stmt: &'t ast::Stmt<'s>, f: &mut dyn FnMut(&'t ast::Expr<'s>)) {
    let macro_exprs = |m: &'t ast::Macro<'s>, f: &mut dyn FnMut(&'t ast::Expr<'s>)| {
        m.args.iter().chain(&m.defaults).for_each(&mut *f)
    };
    match stmt {
        ast::Stmt::EmitExpr(e) => f(&e.expr),
        ast::Stmt::ForLoop(l) => {
            f(&l.target);
            f(&l.iter);
            l.filter_expr.iter().for_each(f);
        }
        ast::Stmt::IfCond(c) => f(&c.expr),
        ast::Stmt::WithBlock(w) => w.assignments.iter().for_each(|(t, v)| {
            f(t);
            f(v);
        }),
        ast::Stmt::Set(s) => {
            f(&s.target);
            f(&s.expr);
        }
        ast::Stmt::SetBlock(s) => {
            f(&s.target);
            s.filter.iter().for_each(f);
        }
        ast::Stmt::AutoEscape(a) => f(&a.enabled),
        ast::Stmt::FilterBlock(b) => f(&b.filter),
        ast::Stmt::Import(i) => {
            f(&i.expr);
            f(&i.name);
        }
        ast::Stmt::FromImport(i) => {
            f(&i.expr);
            i.names.iter().for_each(|(name, alias)| {
                f(name);
                alias.iter().for_each(&mut *f);
            });
        }
        ast::Stmt::Extends(e) => f(&e.name),
        ast::Stmt::Include(i) => f(&i.name),
        ast::Stmt::Macro(m) => macro_exprs(m, f),
        ast::Stmt::CallBlock(c) => {
            f(&c.call.expr);
            call_arg_exprs(&c.call.args, f);
            macro_exprs(&c.macro_decl, f);
        }
        ast::Stmt::Do(d) => {
            f(&d.call.expr);
            call_arg_exprs(&d.call.args, f);
        }
        ast::Stmt::Template(_)
        | ast::Stmt::EmitRaw(_)
        | ast::Stmt::Block(_)
        | ast::Stmt::Continue(_)
        | ast::Stmt::Break(_) => {}
    }
}

pub(super) fn call_arg_exprs<'t, 's>(
    args: &'t [ast::CallArg<'s>],
    f: &mut dyn FnMut(&'t ast::Expr<'s>),
) {
    for arg in args {
        match arg {
            ast::CallArg::Pos(e)
            | ast::CallArg::Kwarg(_, e)
            | ast::CallArg::PosSplat(e)
            | ast::CallArg::KwargSplat(e) => f(e),
        }
    }
}

/// Calls `f` on an expression and on every expression inside it, outer first.
pub(super) fn walk_expr<'t, 's>(expr: &'t ast::Expr<'s>, f: &mut dyn FnMut(&'t ast::Expr<'s>)) {
    f(expr);
    let mut child = |e: &'t ast::Expr<'s>| walk_expr(e, f);
    match expr {
        ast::Expr::Var(_) | ast::Expr::Const(_) => {}
        ast::Expr::Slice(s) => {
            child(&s.expr);
            [&s.start, &s.stop, &s.step]
                .into_iter()
                .flatten()
                .for_each(child);
        }
        ast::Expr::UnaryOp(u) => child(&u.expr),
        ast::Expr::BinOp(b) => {
            child(&b.left);
            child(&b.right);
        }
        ast::Expr::Compare(c) => {
            child(&c.expr);
            c.ops.iter().for_each(|op| child(&op.expr));
        }
        ast::Expr::IfExpr(i) => {
            child(&i.test_expr);
            child(&i.true_expr);
            i.false_expr.iter().for_each(child);
        }
        ast::Expr::Filter(filter) => {
            filter.expr.iter().for_each(&mut child);
            call_arg_exprs(&filter.args, &mut child);
        }
        ast::Expr::Test(t) => {
            child(&t.expr);
            call_arg_exprs(&t.args, &mut child);
        }
        ast::Expr::GetAttr(g) => child(&g.expr),
        ast::Expr::GetItem(g) => {
            child(&g.expr);
            child(&g.subscript_expr);
        }
        ast::Expr::Call(c) => {
            child(&c.expr);
            call_arg_exprs(&c.args, &mut child);
        }
        ast::Expr::List(l) => l.items.iter().for_each(child),
        ast::Expr::Map(m) => m.keys.iter().zip(&m.values).for_each(|(k, v)| {
            child(k);
            child(v);
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn for_loop_iterables_are_guarded() {
        let g = |s: &str| guard_for_loops(s.to_string());
        let cases = [
            (
                "{% for x in y %}{% endfor %}",
                "{% for x in (y)|__for_iterable %}{% endfor %}",
            ),
            (
                "{%- for x in y -%}{{ x }}{%- endfor %}",
                "{%- for x in (y)|__for_iterable -%}{{ x }}{%- endfor %}",
            ),
            (
                "{% for k, v in y.items() %}{% endfor %}",
                "{% for k, v in (y.items())|__for_iterable %}{% endfor %}",
            ),
            (
                "{% for (k, v) in y | dictsort %}{% endfor %}",
                "{% for (k, v) in (y | dictsort)|__for_iterable %}{% endfor %}",
            ),
            (
                "{% for x in y if x.a in ['if', 'b'] and x %}{% endfor %}",
                "{% for x in (y)|__for_iterable if x.a in ['if', 'b'] and x %}{% endfor %}",
            ),
            (
                "{% for x in y[1:] if (x if x else 1) recursive %}{% endfor %}",
                "{% for x in (y[1:])|__for_iterable if (x if x else 1) recursive %}{% endfor %}",
            ),
            (
                "{% for x in a or not b %}{% endfor %}",
                "{% for x in (a or not b)|__for_iterable %}{% endfor %}",
            ),
            (
                "{% for x in (a) %}{% endfor %}{% for x in a == b %}{% endfor %}",
                "{% for x in ((a))|__for_iterable %}{% endfor %}\
                 {% for x in (a == b)|__for_iterable %}{% endfor %}",
            ),
            (
                "{% for x in 'for x in y %}' ~ z %}{% endfor %}",
                "{% for x in ('for x in y %}' ~ z)|__for_iterable %}{% endfor %}",
            ),
            (
                "{% for x in recursive %}{% endfor %}",
                "{% for x in (recursive)|__for_iterable %}{% endfor %}",
            ),
            // Multi-line headers keep their lines.
            (
                "{% for x in\n  [1, 2] +\n  y\n%}\n{% endfor %}",
                "{% for x in\n  ([1, 2] +\n  y)|__for_iterable\n%}\n{% endfor %}",
            ),
            // Loops nested in every kind of block, in order; not in raw blocks or comments.
            (
                "{% macro m(a) %}{% for x in a %}{% endfor %}{% endmacro %}\
                 {% call(u) m(1) %}{% for x in b %}{% endfor %}{% endcall %}\
                 {% set s %}{% for x in c %}{% endfor %}{% endset %}\
                 {% filter upper %}{% for x in d %}{% endfor %}{% endfilter %}\
                 {% with w = 1 %}{% for x in e %}{% for z in x %}{% endfor %}{% else %}\
                 {% for x in f %}{% endfor %}{% endfor %}{% endwith %}\
                 {% if 1 %}{% elif 2 %}{% for x in g %}{% endfor %}{% else %}\
                 {% for x in h %}{% endfor %}{% endif %}\
                 {% raw %}{% for x in y %}{% endraw %}{# {% for x in y %} #}",
                "{% macro m(a) %}{% for x in (a)|__for_iterable %}{% endfor %}{% endmacro %}\
                 {% call(u) m(1) %}{% for x in (b)|__for_iterable %}{% endfor %}{% endcall %}\
                 {% set s %}{% for x in (c)|__for_iterable %}{% endfor %}{% endset %}\
                 {% filter upper %}{% for x in (d)|__for_iterable %}{% endfor %}{% endfilter %}\
                 {% with w = 1 %}{% for x in (e)|__for_iterable %}\
                 {% for z in (x)|__for_iterable %}{% endfor %}{% else %}\
                 {% for x in (f)|__for_iterable %}{% endfor %}{% endfor %}{% endwith %}\
                 {% if 1 %}{% elif 2 %}{% for x in (g)|__for_iterable %}{% endfor %}{% else %}\
                 {% for x in (h)|__for_iterable %}{% endfor %}{% endif %}\
                 {% raw %}{% for x in y %}{% endraw %}{# {% for x in y %} #}",
            ),
        ];
        for (source, want) in cases {
            assert_eq!(g(source), want, "{source}");
        }
        // Templates without loops, and broken ones, are left as they are.
        for source in [
            "no loops",
            "{{ 'for' }}",
            "{% for x in %}",
            "{% for x in y %}",
        ] {
            assert_eq!(g(source), source);
        }
    }

    #[test]
    fn generation_tags_become_blocks() {
        assert_eq!(
            accept_generation_tags("a{% generation %}b{%- endgeneration -%}c{%generation%}"),
            "a{% if true %}b{%- endif -%}c{% if true %}"
        );
        assert_eq!(
            accept_generation_tags("{% generations %}{% set generation = 1 %}"),
            "{% generations %}{% set generation = 1 %}"
        );
    }
}
