//! Generated text checked against stop strings as it grows: which part may already be shown
//! (nothing from a stop string on, nor an ending that may still become one) and whether a stop
//! string has appeared. [`crate::Generation`] stops with it; a server streams what it releases.

/// Text as it is generated, with its stop strings (see the module docs).
///
/// ```
/// use gguf_model::StopText;
///
/// let mut text = StopText::new(["\n\nUser:"]);
/// assert_eq!(text.push("Paris."), "Paris.");
/// assert_eq!(text.push("\n\nUs"), ""); // may be the start of the stop string
/// assert_eq!(text.push("er: and"), "");
/// assert!(text.stopped());
/// assert_eq!(text.text(), "Paris.\n\nUser: and");
/// ```
#[derive(Debug, Clone, Default)]
pub struct StopText {
    stops: Vec<String>,
    text: String,
    /// Bytes of `text` released.
    shown: usize,
    stopped: bool,
}

impl StopText {
    /// Empty text checked against `stops` (empty strings are ignored).
    pub fn new<S: AsRef<str>>(stops: impl IntoIterator<Item = S>) -> StopText {
        StopText {
            stops: stops
                .into_iter()
                .map(|s| s.as_ref().to_string())
                .filter(|s| !s.is_empty())
                .collect(),
            ..StopText::default()
        }
    }

    /// Appends `piece` and returns the text it releases: up to the first stop string once one
    /// is there whole (then [`StopText::stopped`]), else all but an ending that begins a stop
    /// string. After a stop, nothing more is released.
    pub fn push(&mut self, piece: &str) -> &str {
        if self.stopped {
            self.text.push_str(piece);
            return "";
        }
        let from = self.shown;
        self.text.push_str(piece);
        let unseen = &self.text[from..];
        let upto = match self
            .stops
            .iter()
            .filter_map(|s| unseen.find(s.as_str()))
            .min()
        {
            Some(at) => {
                self.stopped = true;
                from + at
            }
            None => self.text.len() - held_back(unseen, &self.stops),
        };
        self.shown = upto;
        &self.text[from..upto]
    }

    /// The text held back at the end of a generation that ended without a stop string (it
    /// turned out not to begin one); empty after a stop.
    pub fn finish(&mut self) -> &str {
        if self.stopped {
            return "";
        }
        let from = std::mem::replace(&mut self.shown, self.text.len());
        &self.text[from..]
    }

    /// Whether a stop string has appeared.
    pub fn stopped(&self) -> bool {
        self.stopped
    }

    /// All the text pushed, stop strings and what follows them included.
    pub fn text(&self) -> &str {
        &self.text
    }
}

/// Bytes at the end of `text` that begin some stop string. A stop string's first byte begins
/// a character, so what comes before them ends on a character boundary.
fn held_back(text: &str, stops: &[String]) -> usize {
    let bytes = text.as_bytes();
    stops
        .iter()
        .map(|s| {
            let s = s.as_bytes();
            (1..s.len().min(bytes.len() + 1))
                .rev()
                .find(|&n| bytes.ends_with(&s[..n]))
                .unwrap_or(0)
        })
        .max()
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Pushes `pieces`; returns what was released piece by piece, then by `finish`.
    fn run(stops: &[&str], pieces: &[&str]) -> (Vec<String>, String, bool) {
        let mut t = StopText::new(stops);
        let shown = pieces.iter().map(|p| t.push(p).to_string()).collect();
        let rest = t.finish().to_string();
        (shown, rest, t.stopped())
    }

    #[test]
    fn text_is_released_up_to_a_stop_string_and_held_back_while_one_may_begin() {
        let stops = ["END", "\n\n"];
        assert_eq!(
            run(&stops, &["abc", " EN", "D x"]),
            (vec!["abc".into(), " ".into(), "".into()], "".into(), true)
        );
        assert_eq!(
            run(&stops, &["a\n", "\nEND"]),
            (vec!["a".into(), "".into()], "".into(), true)
        );
        // A held-back ending that turns out not to be a stop string is released later.
        assert_eq!(
            run(&stops, &["abcE", "Nx", "\n"]),
            (
                vec!["abc".into(), "ENx".into(), "".into()],
                "\n".into(),
                false
            )
        );
        assert_eq!(
            run(&["éa"], &["é", "b"]),
            (vec!["".into(), "éb".into()], "".into(), false)
        );
        // The stop string straddling pieces, found after text was held back.
        assert_eq!(
            run(&["stop"], &["x st", "o", "p!"]),
            (vec!["x ".into(), "".into(), "".into()], "".into(), true)
        );
        // No stops (or only empty ones): everything at once.
        assert_eq!(
            run(&["", ""], &["a", "b"]),
            (vec!["a".into(), "b".into()], "".into(), false)
        );
    }

    #[test]
    fn the_text_keeps_everything_pushed() {
        let mut t = StopText::new(["\n"]);
        t.push("one\ntwo");
        t.push(" three");
        assert!(t.stopped());
        assert_eq!(t.text(), "one\ntwo three");
        assert_eq!(t.push("four"), "");
        assert_eq!(t.finish(), "");
    }
}
