//! The rewrite that routes everything a template does that can build a value larger than its
//! operands through the render's budget ([`super::budget`]).
//!
//! The template is printed anew from minijinja's syntax tree (its spans are too loose to
//! splice text: a method call's starts at its `.`, a conditional's one token early), every
//! compound expression in parentheses, with:
//!
//! - `a ~ b`, `a + b` and `a * b` as `__concat(a, b)`, `__add(a, b)`, `__mul(a, b)`;
//! - `v[start:stop:step]` as `__slice(v, start, stop, step)`, `none` for a bound left out (as
//!   minijinja compiles it);
//! - `{% set ns.attr = value %}` assigning `__assign(ns, value)`;
//! - a list or map literal holding other than constants as `__list(a, b, ...)` or
//!   `__map(k, v, ...)`, which bound the values it holds counted whole (`[x, x]` nested forty
//!   deep is a trillion values to print or compare);
//! - the template's own text as `{{ 'text' }}`: the text minijinja's parser kept, after
//!   `trim_blocks`, `lstrip_blocks` and the tags' `-`/`+` did their work, so that nothing is
//!   left for whitespace control to change, and what a template writes, to its output or into a
//!   captured block, goes through the formatter, which charges it.
//!
//! Each statement starts on its original line (newlines are added inside its tag), so errors
//! name the lines of the template as written. The result is parsed again and checked: nothing
//! left unguarded, and the same tree as the original once the guarded calls are read back as
//! the operations they stand for.

use minijinja::machinery::{self, ast, Token};
use minijinja::value::ValueKind;
use minijinja::Value;

use super::budget::names;
use super::source::{parse, stmt_exprs, syntax, walk_expr, walk_stmts, WHITESPACE};

/// The most operators one tag may hold. minijinja parses a chain of operators (`a + b + ...`,
/// `x.a.b...`, `v|f|g...`) in a loop but compiles, walks and drops the tree it builds by
/// recursion, one stack frame a link: a tag of thousands of operators overflows the stack,
/// which aborts the process. Real templates use a few dozen at most.
pub(super) const MAX_TAG_OPERATORS: usize = 500;

/// Refuses a template with a tag of more than [`MAX_TAG_OPERATORS`] operators, before anything
/// parses it. A template the lexer cannot read is checked up to the error (the parser builds
/// the tree that far before it stops).
pub(super) fn check_tag_sizes(source: &str) -> Result<(), String> {
    let mut in_tag = 0usize;
    for token in machinery::tokenize(source, false, syntax(), WHITESPACE) {
        let Ok((token, span)) = token else {
            break;
        };
        let operator = match token {
            Token::VariableStart | Token::BlockStart => {
                in_tag = 0;
                false
            }
            Token::TemplateData(_)
            | Token::VariableEnd
            | Token::BlockEnd
            | Token::Str(_)
            | Token::String(_)
            | Token::Int(_)
            | Token::Int128(_)
            | Token::Float(_)
            | Token::Comma
            | Token::Colon
            | Token::ParenClose
            | Token::BracketClose
            | Token::BraceClose => false,
            Token::Ident(word) => {
                matches!(word, "and" | "or" | "not" | "is" | "in" | "if" | "else")
            }
            _ => true,
        };
        in_tag += usize::from(operator);
        if in_tag > MAX_TAG_OPERATORS {
            return Err(format!(
                "a tag on line {} holds more than {MAX_TAG_OPERATORS} operators",
                span.start_line
            ));
        }
    }
    Ok(())
}

/// The template with its growing operations guarded (see the module's documentation). A
/// template that does not parse is returned as it is: the engine then reports its syntax error.
pub(super) fn guard_operations(source: String) -> Result<String, String> {
    let Ok(tree) = parse(&source) else {
        return Ok(source);
    };
    let guarded = Printer::print(&tree, Mode::Guard)?;
    let reparsed =
        parse(&guarded).map_err(|e| format!("the rewritten template does not parse: {e}"))?;
    let left = unguarded(&reparsed);
    if left > 0 {
        return Err(format!("{left} operations were left unguarded"));
    }
    if Printer::print(&reparsed, Mode::Canonical)? != Printer::print(&tree, Mode::Canonical)? {
        return Err("the rewritten template differs from the original".into());
    }
    Ok(guarded)
}

/// The operations of a (rewritten) template still outside the guard: text, `~`, `+`, `*`,
/// slices, list and map literals of other than constants, and assignments to an attribute
/// whose value is not `__assign(...)`.
fn unguarded(tree: &ast::Stmt<'_>) -> usize {
    let mut left = 0;
    walk_stmts(tree, &mut |stmt| {
        left += usize::from(match stmt {
            ast::Stmt::EmitRaw(_) => true,
            ast::Stmt::Set(set) => {
                matches!(set.target, ast::Expr::GetAttr(_))
                    && guard_call(&set.expr).is_none_or(|(name, _)| name != names::ASSIGN)
            }
            _ => false,
        });
        // Assignment targets (`a, b` of `{% for a, b in ... %}`) are names, not lists built.
        let targets: Vec<&ast::Expr<'_>> = match stmt {
            ast::Stmt::ForLoop(l) => vec![&l.target],
            ast::Stmt::Set(s) => vec![&s.target],
            ast::Stmt::SetBlock(s) => vec![&s.target],
            ast::Stmt::WithBlock(w) => w.assignments.iter().map(|(t, _)| t).collect(),
            _ => Vec::new(),
        };
        stmt_exprs(stmt, &mut |e| {
            if targets.iter().any(|t| std::ptr::eq(*t, e)) {
                return;
            }
            walk_expr(e, &mut |e| {
                left += usize::from(match e {
                    ast::Expr::Slice(_) => true,
                    ast::Expr::List(l) => !constant_list(l),
                    ast::Expr::Map(m) => !constant_map(m),
                    ast::Expr::BinOp(b) => matches!(
                        b.op,
                        ast::BinOpKind::Add | ast::BinOpKind::Concat | ast::BinOpKind::Mul
                    ),
                    _ => false,
                });
            })
        });
    });
    left
}

/// A list literal of constants only: it cannot hold a value many times over.
fn constant_list(l: &ast::List<'_>) -> bool {
    l.items.iter().all(|e| matches!(e, ast::Expr::Const(_)))
}

/// A map literal of constants only.
fn constant_map(m: &ast::Map<'_>) -> bool {
    m.keys
        .iter()
        .chain(&m.values)
        .all(|e| matches!(e, ast::Expr::Const(_)))
}

/// A call of one of the guarded functions: its name and positional arguments.
fn guard_call<'t, 's>(expr: &'t ast::Expr<'s>) -> Option<(&'s str, Vec<&'t ast::Expr<'s>>)> {
    let ast::Expr::Call(call) = expr else {
        return None;
    };
    let ast::Expr::Var(var) = &call.expr else {
        return None;
    };
    if !names::ALL.contains(&var.id) {
        return None;
    }
    let args = call
        .args
        .iter()
        .map(|a| match a {
            ast::CallArg::Pos(e) => Some(e),
            _ => None,
        })
        .collect::<Option<Vec<_>>>()?;
    Some((var.id, args))
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// The template to run: operations guarded, statements on their lines.
    Guard,
    /// For the check: guarded calls read back as their operations, no line padding.
    Canonical,
}

/// Prints a syntax tree back to template source.
struct Printer {
    out: String,
    line: usize,
    mode: Mode,
}

type Printed = Result<(), String>;

impl Printer {
    fn print(tree: &ast::Stmt<'_>, mode: Mode) -> Result<String, String> {
        let mut p = Printer {
            out: String::new(),
            line: 1,
            mode,
        };
        p.stmt(tree)?;
        Ok(p.out)
    }

    fn push(&mut self, s: &str) {
        self.line += s.matches('\n').count();
        self.out.push_str(s);
    }

    /// Opens a tag (`{{` or `{%`) for a statement of line `line`, with the newlines that put
    /// what follows on that line.
    fn open(&mut self, tag: &str, line: u16) {
        self.push(tag);
        self.pad_to_line(line);
        self.push(" ");
    }

    /// Newlines (inside a tag) up to line `line`, where minijinja will report what follows.
    fn pad_to_line(&mut self, line: u16) {
        if self.mode == Mode::Guard {
            while self.line < usize::from(line) {
                self.push("\n");
            }
        }
    }

    fn body(&mut self, body: &[ast::Stmt<'_>]) -> Printed {
        body.iter().try_for_each(|s| self.stmt(s))
    }

    fn stmt(&mut self, stmt: &ast::Stmt<'_>) -> Printed {
        let line = |span: machinery::Span| span.start_line;
        match stmt {
            ast::Stmt::Template(t) => self.body(&t.children)?,
            ast::Stmt::EmitExpr(e) => {
                self.open("{{", line(e.span()));
                self.expr(&e.expr)?;
                self.push(" }}");
            }
            ast::Stmt::EmitRaw(r) => {
                self.open("{{", line(r.span()));
                self.string(r.raw);
                self.push(" }}");
            }
            ast::Stmt::ForLoop(l) => {
                self.open("{%", line(l.span()));
                self.push("for ");
                self.target(&l.target)?;
                self.push(" in ");
                self.expr(&l.iter)?;
                if let Some(f) = &l.filter_expr {
                    self.push(" if ");
                    self.expr(f)?;
                }
                if l.recursive {
                    self.push(" recursive");
                }
                self.push(" %}");
                self.body(&l.body)?;
                if !l.else_body.is_empty() {
                    self.push("{% else %}");
                    self.body(&l.else_body)?;
                }
                self.push("{% endfor %}");
            }
            ast::Stmt::IfCond(c) => {
                self.open("{%", line(c.span()));
                self.push("if ");
                self.expr(&c.expr)?;
                self.push(" %}");
                self.body(&c.true_body)?;
                if !c.false_body.is_empty() {
                    self.push("{% else %}");
                    self.body(&c.false_body)?;
                }
                self.push("{% endif %}");
            }
            ast::Stmt::WithBlock(w) => {
                self.open("{%", line(w.span()));
                self.push("with ");
                for (i, (target, value)) in w.assignments.iter().enumerate() {
                    if i > 0 {
                        self.push(", ");
                    }
                    self.target(target)?;
                    self.push(" = ");
                    self.expr(value)?;
                }
                self.push(" %}");
                self.body(&w.body)?;
                self.push("{% endwith %}");
            }
            ast::Stmt::Set(s) => {
                self.open("{%", line(s.span()));
                self.push("set ");
                self.target(&s.target)?;
                self.push(" = ");
                match (&s.target, self.mode) {
                    (ast::Expr::GetAttr(attr), Mode::Guard) => {
                        self.push(names::ASSIGN);
                        self.push("(");
                        self.target(&attr.expr)?;
                        self.push(", ");
                        self.expr(&s.expr)?;
                        self.push(")");
                    }
                    _ => self.expr(&s.expr)?,
                }
                self.push(" %}");
            }
            ast::Stmt::SetBlock(s) => {
                self.open("{%", line(s.span()));
                self.push("set ");
                self.target(&s.target)?;
                if let Some(f) = &s.filter {
                    self.push("|");
                    self.filter_chain(f)?;
                }
                self.push(" %}");
                self.body(&s.body)?;
                self.push("{% endset %}");
            }
            ast::Stmt::AutoEscape(a) => {
                self.open("{%", line(a.span()));
                self.push("autoescape ");
                self.expr(&a.enabled)?;
                self.push(" %}");
                self.body(&a.body)?;
                self.push("{% endautoescape %}");
            }
            ast::Stmt::FilterBlock(f) => {
                self.open("{%", line(f.span()));
                self.push("filter ");
                self.filter_chain(&f.filter)?;
                self.push(" %}");
                self.body(&f.body)?;
                self.push("{% endfilter %}");
            }
            ast::Stmt::Block(b) => {
                self.open("{%", line(b.span()));
                self.push("block ");
                self.push(b.name);
                if b.required {
                    self.push(" required");
                }
                self.push(" %}");
                self.body(&b.body)?;
                self.push("{% endblock %}");
            }
            ast::Stmt::Import(i) => {
                self.open("{%", line(i.span()));
                self.push("import ");
                self.expr(&i.expr)?;
                self.push(" as ");
                self.target(&i.name)?;
                self.push(" %}");
            }
            ast::Stmt::FromImport(i) => {
                self.open("{%", line(i.span()));
                self.push("from ");
                self.expr(&i.expr)?;
                self.push(" import ");
                for (n, (name, alias)) in i.names.iter().enumerate() {
                    if n > 0 {
                        self.push(", ");
                    }
                    self.target(name)?;
                    if let Some(alias) = alias {
                        self.push(" as ");
                        self.target(alias)?;
                    }
                }
                self.push(" %}");
            }
            ast::Stmt::Extends(e) => {
                self.open("{%", line(e.span()));
                self.push("extends ");
                self.expr(&e.name)?;
                self.push(" %}");
            }
            ast::Stmt::Include(i) => {
                self.open("{%", line(i.span()));
                self.push("include ");
                self.expr(&i.name)?;
                if i.ignore_missing {
                    self.push(" ignore missing");
                }
                self.push(" %}");
            }
            ast::Stmt::Macro(m) => {
                self.open("{%", line(m.span()));
                self.push("macro ");
                self.push(m.name);
                self.macro_args(m)?;
                self.push(" %}");
                self.body(&m.body)?;
                self.push("{% endmacro %}");
            }
            ast::Stmt::CallBlock(c) => {
                self.open("{%", line(c.span()));
                // The arguments' parentheses always: a call printed after `call` may start
                // with one.
                self.push("call");
                self.macro_args(&c.macro_decl)?;
                self.push(" ");
                self.call(&c.call.expr, &c.call.args)?;
                self.push(" %}");
                self.body(&c.macro_decl.body)?;
                self.push("{% endcall %}");
            }
            ast::Stmt::Continue(c) => {
                self.open("{%", line(c.span()));
                self.push("continue %}");
            }
            ast::Stmt::Break(b) => {
                self.open("{%", line(b.span()));
                self.push("break %}");
            }
            ast::Stmt::Do(d) => {
                self.open("{%", line(d.span()));
                self.push("do ");
                self.call(&d.call.expr, &d.call.args)?;
                self.push(" %}");
            }
        }
        Ok(())
    }

    fn macro_args(&mut self, m: &ast::Macro<'_>) -> Printed {
        self.push("(");
        let first_default = m.args.len().saturating_sub(m.defaults.len());
        for (i, arg) in m.args.iter().enumerate() {
            if i > 0 {
                self.push(", ");
            }
            self.target(arg)?;
            if let Some(default) = i.checked_sub(first_default).and_then(|d| m.defaults.get(d)) {
                self.push("=");
                self.expr(default)?;
            }
        }
        self.push(")");
        Ok(())
    }

    /// An assignment target: a name, `a.b.c`, or a tuple of targets.
    fn target(&mut self, target: &ast::Expr<'_>) -> Printed {
        match target {
            ast::Expr::Var(v) => self.push(v.id),
            ast::Expr::GetAttr(g) => {
                self.target(&g.expr)?;
                self.push(".");
                self.push(g.name);
            }
            ast::Expr::List(l) => {
                self.push("(");
                for item in &l.items {
                    self.target(item)?;
                    self.push(", ");
                }
                self.push(")");
            }
            _ => return Err("an assignment target the rewrite does not know".into()),
        }
        Ok(())
    }

    /// `f|g(args)|h` of a filter block or a set block: filters without an operand.
    fn filter_chain(&mut self, filter: &ast::Expr<'_>) -> Printed {
        let ast::Expr::Filter(f) = filter else {
            return Err("a filter block without a filter".into());
        };
        if let Some(inner) = &f.expr {
            self.filter_chain(inner)?;
            self.push("|");
        }
        self.push(f.name);
        self.args(&f.args, true)
    }

    /// `(args)`, left out when there are none and `optional`.
    fn args(&mut self, args: &[ast::CallArg<'_>], optional: bool) -> Printed {
        if args.is_empty() && optional {
            return Ok(());
        }
        self.push("(");
        for (i, arg) in args.iter().enumerate() {
            if i > 0 {
                self.push(", ");
            }
            match arg {
                ast::CallArg::Pos(e) => self.expr(e)?,
                ast::CallArg::Kwarg(name, e) => {
                    self.push(name);
                    self.push("=");
                    self.expr(e)?;
                }
                ast::CallArg::PosSplat(e) => {
                    self.push("*");
                    self.expr(e)?;
                }
                ast::CallArg::KwargSplat(e) => {
                    self.push("**");
                    self.expr(e)?;
                }
            }
        }
        self.push(")");
        Ok(())
    }

    /// A call: a bare name stays bare (`loop(...)`, `super()` and `caller()` are told by it),
    /// anything else in parentheses, which the parser drops.
    fn call(&mut self, callee: &ast::Expr<'_>, args: &[ast::CallArg<'_>]) -> Printed {
        self.expr(callee)?;
        self.args(args, false)
    }

    /// `function(a, b, ...)`, `none` for an operand left out.
    fn guarded(&mut self, function: &str, operands: &[Option<&ast::Expr<'_>>]) -> Printed {
        self.push(function);
        self.push("(");
        for (i, operand) in operands.iter().enumerate() {
            if i > 0 {
                self.push(", ");
            }
            match operand {
                Some(e) => self.expr(e)?,
                None => self.push("none"),
            }
        }
        self.push(")");
        Ok(())
    }

    fn binop(&mut self, op: &str, left: &ast::Expr<'_>, right: &ast::Expr<'_>) -> Printed {
        self.push("(");
        self.expr(left)?;
        self.push(" ");
        self.push(op);
        self.push(" ");
        self.expr(right)?;
        self.push(")");
        Ok(())
    }

    fn slice(&mut self, value: &ast::Expr<'_>, bounds: [Option<&ast::Expr<'_>>; 3]) -> Printed {
        self.expr(value)?;
        self.push("[");
        for (i, bound) in bounds.into_iter().enumerate() {
            if i > 0 {
                self.push(":");
            }
            match bound {
                // A bound written `none` and one left out compile alike.
                Some(ast::Expr::Const(c)) if c.value.is_none() => {}
                Some(e) => self.expr(e)?,
                None => {}
            }
        }
        self.push("]");
        Ok(())
    }

    fn list<'e, 's: 'e>(&mut self, items: impl Iterator<Item = &'e ast::Expr<'s>>) -> Printed {
        self.push("[");
        for (i, item) in items.enumerate() {
            if i > 0 {
                self.push(", ");
            }
            self.expr(item)?;
        }
        self.push("]");
        Ok(())
    }

    fn map<'e, 's: 'e>(
        &mut self,
        pairs: impl Iterator<Item = (&'e ast::Expr<'s>, &'e ast::Expr<'s>)>,
    ) -> Printed {
        self.push("{");
        for (i, (k, v)) in pairs.enumerate() {
            if i > 0 {
                self.push(", ");
            }
            self.expr(k)?;
            self.push(": ");
            self.expr(v)?;
        }
        self.push("}");
        Ok(())
    }

    fn expr(&mut self, expr: &ast::Expr<'_>) -> Printed {
        self.pad_to_line(expr.span().start_line);
        if self.mode == Mode::Canonical {
            if let Some((name, args)) = guard_call(expr) {
                return match (name, args.as_slice()) {
                    (names::CONCAT, [a, b]) => self.binop("~", a, b),
                    (names::ADD, [a, b]) => self.binop("+", a, b),
                    (names::MUL, [a, b]) => self.binop("*", a, b),
                    (names::SLICE, [v, a, b, c]) => self.slice(v, [Some(a), Some(b), Some(c)]),
                    (names::ASSIGN, [_, v]) => self.expr(v),
                    (names::LIST, items) => self.list(items.iter().copied()),
                    (names::MAP, items) if items.len() % 2 == 0 => {
                        self.map(items.chunks(2).map(|kv| (kv[0], kv[1])))
                    }
                    _ => Err(format!("a call of `{name}` the rewrite did not write")),
                };
            }
        }
        match expr {
            ast::Expr::Var(v) => self.push(v.id),
            ast::Expr::Const(c) => self.constant(&c.value)?,
            ast::Expr::Slice(s) => {
                let bounds = [s.start.as_ref(), s.stop.as_ref(), s.step.as_ref()];
                match self.mode {
                    Mode::Guard => self.guarded(
                        names::SLICE,
                        &[Some(&s.expr), bounds[0], bounds[1], bounds[2]],
                    )?,
                    Mode::Canonical => self.slice(&s.expr, bounds)?,
                }
            }
            ast::Expr::UnaryOp(u) => {
                self.push(match u.op {
                    ast::UnaryOpKind::Not => "(not ",
                    ast::UnaryOpKind::Neg => "(-",
                });
                self.expr(&u.expr)?;
                self.push(")");
            }
            ast::Expr::BinOp(b) => {
                let (op, guard) = match b.op {
                    ast::BinOpKind::Eq => ("==", None),
                    ast::BinOpKind::Ne => ("!=", None),
                    ast::BinOpKind::Lt => ("<", None),
                    ast::BinOpKind::Lte => ("<=", None),
                    ast::BinOpKind::Gt => (">", None),
                    ast::BinOpKind::Gte => (">=", None),
                    ast::BinOpKind::ScAnd => ("and", None),
                    ast::BinOpKind::ScOr => ("or", None),
                    ast::BinOpKind::Add => ("+", Some(names::ADD)),
                    ast::BinOpKind::Sub => ("-", None),
                    ast::BinOpKind::Mul => ("*", Some(names::MUL)),
                    ast::BinOpKind::Div => ("/", None),
                    ast::BinOpKind::FloorDiv => ("//", None),
                    ast::BinOpKind::Rem => ("%", None),
                    ast::BinOpKind::Pow => ("**", None),
                    ast::BinOpKind::Concat => ("~", Some(names::CONCAT)),
                    ast::BinOpKind::In => ("in", None),
                };
                match guard.filter(|_| self.mode == Mode::Guard) {
                    Some(function) => self.guarded(function, &[Some(&b.left), Some(&b.right)])?,
                    None => self.binop(op, &b.left, &b.right)?,
                }
            }
            ast::Expr::Compare(c) => {
                self.push("(");
                self.expr(&c.expr)?;
                for op in &c.ops {
                    self.push(match op.op {
                        ast::CompareOpKind::Eq => " == ",
                        ast::CompareOpKind::Ne => " != ",
                        ast::CompareOpKind::Lt => " < ",
                        ast::CompareOpKind::Lte => " <= ",
                        ast::CompareOpKind::Gt => " > ",
                        ast::CompareOpKind::Gte => " >= ",
                        ast::CompareOpKind::In => " in ",
                        ast::CompareOpKind::NotIn => " not in ",
                    });
                    self.expr(&op.expr)?;
                }
                self.push(")");
            }
            ast::Expr::IfExpr(i) => {
                self.push("(");
                self.expr(&i.true_expr)?;
                self.push(" if ");
                self.expr(&i.test_expr)?;
                if let Some(e) = &i.false_expr {
                    self.push(" else ");
                    self.expr(e)?;
                }
                self.push(")");
            }
            ast::Expr::Filter(f) => {
                let Some(value) = &f.expr else {
                    return Err("a filter without an operand in an expression".into());
                };
                self.push("(");
                self.expr(value)?;
                self.push("|");
                self.push(f.name);
                self.args(&f.args, true)?;
                self.push(")");
            }
            ast::Expr::Test(t) => {
                self.push("(");
                self.expr(&t.expr)?;
                self.push(" is ");
                self.push(t.name);
                self.args(&t.args, true)?;
                self.push(")");
            }
            ast::Expr::GetAttr(g) => {
                self.expr(&g.expr)?;
                self.push(".");
                self.push(g.name);
            }
            ast::Expr::GetItem(g) => {
                self.expr(&g.expr)?;
                self.push("[");
                self.expr(&g.subscript_expr)?;
                self.push("]");
            }
            ast::Expr::Call(c) => {
                self.push("(");
                self.call(&c.expr, &c.args)?;
                self.push(")");
            }
            ast::Expr::List(l) if self.mode == Mode::Guard && !constant_list(l) => {
                let items: Vec<_> = l.items.iter().map(Some).collect();
                self.guarded(names::LIST, &items)?;
            }
            ast::Expr::List(l) => self.list(l.items.iter())?,
            ast::Expr::Map(m) if self.mode == Mode::Guard && !constant_map(m) => {
                let items: Vec<_> = m
                    .keys
                    .iter()
                    .zip(&m.values)
                    .flat_map(|(k, v)| [Some(k), Some(v)])
                    .collect();
                self.guarded(names::MAP, &items)?;
            }
            ast::Expr::Map(m) => self.map(m.keys.iter().zip(&m.values))?,
        }
        Ok(())
    }

    /// A literal: a string, number, boolean or none.
    fn constant(&mut self, value: &Value) -> Printed {
        match value.kind() {
            ValueKind::String => self.string(value.as_str().unwrap_or_default()),
            ValueKind::None => self.push("none"),
            ValueKind::Bool => self.push(if value.is_true() { "true" } else { "false" }),
            ValueKind::Number if value.is_integer() => {
                let text = value.to_string();
                if text.starts_with('-') {
                    self.push(&format!("({text})"));
                } else {
                    self.push(&text);
                }
            }
            ValueKind::Number => {
                let f = f64::try_from(value.clone()).map_err(|e| e.to_string())?;
                let text = match f {
                    f if f.is_nan() => return Err("a literal that is not a number".into()),
                    f if f == f64::INFINITY => "1e999".to_string(),
                    f if f == f64::NEG_INFINITY => "(-1e999)".to_string(),
                    f if f < 0.0 => format!("({f:?})"),
                    f => format!("{f:?}"),
                };
                self.push(&text);
            }
            _ => {
                return Err(format!(
                    "a {} literal the rewrite does not know",
                    value.kind()
                ))
            }
        }
        Ok(())
    }

    /// A string literal, in single quotes; the newlines escaped so that lines stay where
    /// [`Printer::open`] puts them.
    fn string(&mut self, s: &str) {
        self.out.reserve(s.len() + 2);
        self.out.push('\'');
        for c in s.chars() {
            match c {
                '\\' => self.out.push_str("\\\\"),
                '\'' => self.out.push_str("\\'"),
                '\n' => self.out.push_str("\\n"),
                '\r' => self.out.push_str("\\r"),
                c => self.out.push(c),
            }
        }
        self.out.push('\'');
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn growing_operations_become_guarded_calls() {
        let g = |s: &str| guard_operations(s.to_string()).unwrap();
        let cases = [
            ("a{{ b ~ c }}d", "{{ 'a' }}{{ __concat(b, c) }}{{ 'd' }}"),
            (
                "{{ x.strip() + y[1:] * 2 }}",
                "{{ __add((x.strip()), __mul(__slice(y, 1, none, none), 2)) }}",
            ),
            (
                "{% set ns.s = ns.s ~ 'x' %}",
                "{% set ns.s = __assign(ns, __concat(ns.s, 'x')) %}",
            ),
            (
                "{% if a %}\n  x\n{% endif %}",
                "{% if a %}{{\n '  x\\n' }}{% endif %}",
            ),
            (
                "{% for a, b in c if a - b %}{{ loop(d) }}{% else %}e{% endfor %}",
                "{% for (a, b, ) in c if (a - b) %}{{ (loop(d)) }}{% else %}{{ 'e' }}{% endfor %}",
            ),
            (
                "{% macro m(a, b=1) %}{{ caller() }}{% endmacro %}{% call(x) m(2) %}'\\{% endcall %}",
                "{% macro m(a, b=1) %}{{ (caller()) }}{% endmacro %}\
                 {% call(x) m(2) %}{{ '\\'\\\\' }}{% endcall %}",
            ),
        ];
        for (source, want) in cases {
            assert_eq!(g(source), want, "{source}");
        }
        // A template that does not parse is left to the engine to report.
        assert_eq!(g("{{ a + }}"), "{{ a + }}");
    }
}
