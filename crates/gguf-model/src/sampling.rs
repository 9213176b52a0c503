//! Choosing the next token from logits, in llama.cpp's default order: repetition, presence and
//! frequency penalties, then top-k, top-p, min-p, temperature, and a seeded draw (or the
//! argmax when the temperature is 0).

/// Sampling settings. The defaults are llama.cpp's.
#[derive(Debug, Clone, PartialEq)]
pub struct SamplerConfig {
    /// Temperature; 0 (or less) picks the most likely token.
    pub temperature: f32,
    /// Keep the `top_k` most likely tokens (0: all).
    pub top_k: usize,
    /// Keep the smallest set whose probability reaches `top_p` (1: all).
    pub top_p: f32,
    /// Drop tokens less likely than `min_p` times the most likely one (0: none).
    pub min_p: f32,
    /// Divide positive (multiply negative) logits of recent tokens by this (1: off).
    pub repeat_penalty: f32,
    /// Subtract this from the logit of every recent token (0: off).
    pub presence_penalty: f32,
    /// Subtract this times its count from the logit of each recent token (0: off).
    pub frequency_penalty: f32,
    /// How many recent tokens the penalties look at.
    pub penalty_last_n: usize,
    /// Seed of the random draw.
    pub seed: u64,
}

impl Default for SamplerConfig {
    fn default() -> Self {
        SamplerConfig {
            temperature: 0.8,
            top_k: 40,
            top_p: 0.95,
            min_p: 0.05,
            repeat_penalty: 1.0,
            presence_penalty: 0.0,
            frequency_penalty: 0.0,
            penalty_last_n: 64,
            seed: 0x5EED,
        }
    }
}

impl SamplerConfig {
    /// Refuses settings that mean nothing: NaN or infinite numbers, and a repetition penalty
    /// that is not positive (it divides logits). Kept as llama.cpp has them: a temperature of
    /// 0 or less is greedy, `top_p` of 1 or more, `min_p` of 0 or less and `top_k` 0 disable
    /// their cut.
    pub fn check(&self) -> crate::Result<()> {
        let fields = [
            ("temperature", self.temperature),
            ("top_p", self.top_p),
            ("min_p", self.min_p),
            ("repeat_penalty", self.repeat_penalty),
            ("presence_penalty", self.presence_penalty),
            ("frequency_penalty", self.frequency_penalty),
        ];
        if let Some((name, value)) = fields.iter().find(|(_, v)| !v.is_finite()) {
            return Err(crate::ModelError::Request(format!(
                "sampler: {name} must be a finite number, not {value}"
            )));
        }
        if self.repeat_penalty <= 0.0 {
            return Err(crate::ModelError::Request(format!(
                "sampler: repeat_penalty must be positive (1 is off), not {}",
                self.repeat_penalty
            )));
        }
        Ok(())
    }

    /// Greedy decoding: always the most likely token.
    pub fn greedy() -> SamplerConfig {
        SamplerConfig {
            temperature: 0.0,
            ..SamplerConfig::default()
        }
    }
}

/// A seeded sampler (its random state advances with each draw).
#[derive(Debug, Clone)]
pub struct Sampler {
    config: SamplerConfig,
    rng: u64,
    candidates: Vec<(u32, f32)>,
    counts: std::collections::HashMap<u32, u32>,
    /// The logits after the penalties (reused between calls).
    penalized: Vec<f32>,
}

impl Sampler {
    /// A sampler with `config`.
    pub fn new(config: SamplerConfig) -> Sampler {
        Sampler {
            rng: config.seed ^ 0x9E37_79B9_7F4A_7C15,
            config,
            candidates: Vec::new(),
            counts: std::collections::HashMap::new(),
            penalized: Vec::new(),
        }
    }

    /// The settings.
    pub fn config(&self) -> &SamplerConfig {
        &self.config
    }

    /// SplitMix64: a small, well-distributed generator, enough for drawing tokens.
    fn next_f64(&mut self) -> f64 {
        self.rng = self.rng.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.rng;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        (z >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Picks a token from `logits` given the `history` of tokens so far (for the penalties).
    pub fn sample(&mut self, logits: &[f32], history: &[u32]) -> u32 {
        let c = &self.config;
        let penalize =
            c.repeat_penalty != 1.0 || c.presence_penalty != 0.0 || c.frequency_penalty != 0.0;
        let logits = if penalize && !history.is_empty() {
            let buf = &mut self.penalized;
            buf.clear();
            buf.extend_from_slice(logits);
            self.counts.clear();
            for &t in &history[history.len().saturating_sub(c.penalty_last_n)..] {
                *self.counts.entry(t).or_insert(0) += 1;
            }
            for (&t, &n) in &self.counts {
                let Some(l) = buf.get_mut(t as usize) else {
                    continue;
                };
                if *l > 0.0 {
                    *l /= c.repeat_penalty;
                } else {
                    *l *= c.repeat_penalty;
                }
                *l -= n as f32 * c.frequency_penalty + c.presence_penalty;
            }
            &buf[..]
        } else {
            logits
        };
        if c.temperature <= 0.0 {
            return argmax(logits);
        }
        let cands = &mut self.candidates;
        cands.clear();
        cands.extend(logits.iter().enumerate().map(|(i, &l)| (i as u32, l)));
        cands.sort_unstable_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        if c.top_k > 0 {
            cands.truncate(c.top_k.max(1));
        }
        // Probabilities of the sorted candidates.
        let softmax = |cands: &[(u32, f32)]| -> Vec<f32> {
            let max = cands[0].1;
            let e: Vec<f32> = cands.iter().map(|&(_, l)| (l - max).exp()).collect();
            let sum: f32 = e.iter().sum();
            e.into_iter().map(|x| x / sum).collect()
        };
        if c.top_p < 1.0 {
            let p = softmax(cands);
            let mut cum = 0.0;
            let mut keep = cands.len();
            for (i, &pi) in p.iter().enumerate() {
                cum += pi;
                if cum >= c.top_p {
                    keep = i + 1;
                    break;
                }
            }
            cands.truncate(keep.max(1));
        }
        if c.min_p > 0.0 {
            let p = softmax(cands);
            let threshold = p[0] * c.min_p;
            let keep = p.iter().take_while(|&&pi| pi >= threshold).count();
            cands.truncate(keep.max(1));
        }
        for cand in cands.iter_mut() {
            cand.1 /= c.temperature;
        }
        // A temperature so small (1e-38, a subnormal) that the largest logit divided by it
        // overflows: every other candidate is then at least 2^-24 of that logit below it, so
        // its probability, exp(-2e31) or less, is exactly 0, and the draw is the argmax (the
        // first candidate: the largest logit, the lowest id of equal ones, as `argmax`).
        // The softmax would compute inf - inf = NaN instead.
        if !cands[0].1.is_finite() {
            return cands[0].0;
        }
        let p = softmax(cands);
        let r = self.next_f64() as f32;
        let mut cum = 0.0;
        for (i, &pi) in p.iter().enumerate() {
            cum += pi;
            if r < cum {
                return self.candidates[i].0;
            }
        }
        self.candidates[self.candidates.len() - 1].0
    }
}

/// The index of the largest logit (the first of equal ones).
pub fn argmax(logits: &[f32]) -> u32 {
    let mut best = 0;
    for (i, &l) in logits.iter().enumerate() {
        if l > logits[best] {
            best = i;
        }
    }
    best as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn meaningless_settings_are_refused_and_llama_cpp_habits_kept() {
        let with = |f: fn(&mut SamplerConfig)| {
            let mut c = SamplerConfig::default();
            f(&mut c);
            c.check().map_err(|e| e.to_string())
        };
        for (bad, field) in [
            (with(|c| c.temperature = f32::NAN), "temperature"),
            (with(|c| c.temperature = f32::INFINITY), "temperature"),
            (with(|c| c.top_p = f32::NAN), "top_p"),
            (with(|c| c.min_p = f32::NEG_INFINITY), "min_p"),
            (with(|c| c.presence_penalty = f32::NAN), "presence_penalty"),
            (
                with(|c| c.frequency_penalty = f32::INFINITY),
                "frequency_penalty",
            ),
            (with(|c| c.repeat_penalty = f32::NAN), "repeat_penalty"),
            (with(|c| c.repeat_penalty = -1.0), "repeat_penalty"),
            (with(|c| c.repeat_penalty = 0.0), "repeat_penalty"),
        ] {
            let message = bad.unwrap_err();
            assert!(message.contains(field), "{message}");
        }
        // Greedy by temperature 0 or below; top-p 1, top-k 0 and min-p 0 switch cuts off.
        assert!(with(|c| c.temperature = 0.0).is_ok());
        assert!(with(|c| c.temperature = -1.0).is_ok());
        assert!(with(|c| {
            c.top_p = 1.0;
            c.top_k = 0;
            c.min_p = 0.0
        })
        .is_ok());
    }

    #[test]
    fn greedy_takes_the_argmax() {
        let mut s = Sampler::new(SamplerConfig::greedy());
        assert_eq!(s.sample(&[0.1, 2.0, 1.9, 2.0], &[]), 1);
    }

    #[test]
    fn penalties_follow_llama_cpp() {
        let mut s = Sampler::new(SamplerConfig {
            repeat_penalty: 2.0,
            ..SamplerConfig::greedy()
        });
        // Token 1 (3.0) is halved to 1.5 and loses to token 2 (2.0); a negative logit doubles.
        assert_eq!(s.sample(&[-1.0, 3.0, 2.0], &[1, 0]), 2);
        let mut s = Sampler::new(SamplerConfig {
            presence_penalty: 1.5,
            frequency_penalty: 0.5,
            ..SamplerConfig::greedy()
        });
        // Token 0: 4.0 - (2 * 0.5 + 1.5) = 1.5 < 2.0.
        assert_eq!(s.sample(&[4.0, 2.0], &[0, 0]), 1);
    }

    #[test]
    fn top_k_one_is_greedy_and_seeds_repeat() {
        let logits: Vec<f32> = (0..100).map(|i| ((i * 37) % 100) as f32 / 10.0).collect();
        let mut s = Sampler::new(SamplerConfig {
            top_k: 1,
            ..SamplerConfig::default()
        });
        assert_eq!(s.sample(&logits, &[]), argmax(&logits));
        let draw = |seed| {
            let mut s = Sampler::new(SamplerConfig {
                temperature: 1.5,
                top_k: 0,
                top_p: 1.0,
                min_p: 0.0,
                seed,
                ..SamplerConfig::default()
            });
            (0..20).map(|_| s.sample(&logits, &[])).collect::<Vec<_>>()
        };
        assert_eq!(draw(7), draw(7));
        assert_ne!(draw(7), draw(8));
    }

    #[test]
    fn the_smallest_positive_temperatures_are_greedy() {
        // Logits as a model's: positive, negative, or all negative (whose division overflows
        // to -inf), with the largest not first and not last.
        let mixed: Vec<f32> = (0..300)
            .map(|i| ((i * 7919) % 300) as f32 / 13.0 - 9.0)
            .collect();
        let negative: Vec<f32> = mixed.iter().map(|l| l - 40.0).collect();
        // Two equal largest logits: the tie rule picks the lower id.
        let tied = [3.0f32, 7.5, -2.0, 7.5, 1.0];
        let temperatures = [
            1e-45,
            f32::from_bits(1),
            1e-40,
            f32::from_bits(0x0040_0000),
            1e-38,
            f32::MIN_POSITIVE,
            1e-30,
            1e-6,
        ];
        for logits in [&mixed[..], &negative, &tied] {
            let expected = argmax(logits);
            assert!(expected != 0 && expected as usize != logits.len() - 1);
            for temperature in temperatures {
                for (top_k, top_p, min_p) in [(40, 0.95, 0.05), (0, 1.0, 0.0)] {
                    for seed in 0..8 {
                        let mut s = Sampler::new(SamplerConfig {
                            temperature,
                            top_k,
                            top_p,
                            min_p,
                            seed,
                            ..SamplerConfig::default()
                        });
                        for _ in 0..4 {
                            // Where nothing overflows (1e-30 and above) ties are drawn
                            // among, as they should be.
                            let drawn = s.sample(logits, &[]);
                            if logits == tied && temperature >= 1e-30 {
                                assert!(drawn == 1 || drawn == 3);
                            } else {
                                assert_eq!(
                                    drawn, expected,
                                    "temperature {temperature:e}, seed {seed}, top_k {top_k}"
                                );
                            }
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn min_p_and_top_p_cut_the_tail() {
        // Probabilities ~ [0.64, 0.24, 0.09, 0.03]: min_p 0.2 keeps two tokens.
        let logits = [2.0f32, 1.0, 0.0, -1.0];
        let mut s = Sampler::new(SamplerConfig {
            temperature: 1.0,
            top_k: 0,
            top_p: 1.0,
            min_p: 0.2,
            ..SamplerConfig::default()
        });
        for _ in 0..200 {
            assert!(s.sample(&logits, &[]) < 2);
        }
        let mut s = Sampler::new(SamplerConfig {
            temperature: 1.0,
            top_k: 0,
            top_p: 0.5,
            min_p: 0.0,
            ..SamplerConfig::default()
        });
        for _ in 0..200 {
            assert_eq!(s.sample(&logits, &[]), 0);
        }
    }
}
