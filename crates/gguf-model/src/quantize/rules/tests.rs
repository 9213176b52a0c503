//! The rules on small made-up models.

use super::*;

fn facts(n_layer: u32, n_head: u32, n_head_kv: u32) -> ModelFacts {
    ModelFacts {
        arch: "llama".into(),
        n_layer,
        n_head,
        n_head_kv,
        n_expert: 0,
    }
}

#[test]
fn names_and_ids_round_trip() {
    for name in FileType::names() {
        let ft = FileType::from_name(name).unwrap();
        assert_eq!(FileType::from_name(&ft.id().to_string()), Some(ft));
        assert_eq!(FileType::from_name(&name.to_lowercase()), Some(ft));
    }
    assert_eq!(FileType::from_name("Q4_K"), Some(FileType::Q4_K_M));
    assert_eq!(FileType::Q4_K_M.name(), "Q4_K_M");
    assert_eq!(FileType::AllF32.name(), "F32");
    assert_eq!(FileType::from_name("15"), Some(FileType::Q4_K_M));
    assert_eq!(FileType::from_name("Q4_2"), None);
}

#[test]
fn the_order_is_outside_blocks_first_then_by_block_number() {
    let names = [
        "blk.10.attn_q.weight",
        "output.weight",
        "blk.2.ffn_up.weight",
        "blk.2.attn_k.weight",
        "token_embd.weight",
    ];
    let order: Vec<&str> = quantize_order(&names).iter().map(|&i| names[i]).collect();
    assert_eq!(
        order,
        [
            "output.weight",
            "token_embd.weight",
            "blk.2.attn_k.weight",
            "blk.2.ffn_up.weight",
            "blk.10.attn_q.weight"
        ]
    );
}

/// Q4_K_M on a 30-layer GQA-3 model with rows of 512: attn_v and ffn_down get Q6_K on the layers
/// `use_more_bits` picks (the first and last eighth, then every third).
#[test]
fn q4_k_m_raises_the_layers_use_more_bits_picks() {
    let shape = [512u64, 512];
    let names: Vec<String> = (0..30)
        .flat_map(|l| {
            ["attn_v.weight", "ffn_down.weight", "attn_q.weight"].map(|s| format!("blk.{l}.{s}"))
        })
        .collect();
    let tensors: Vec<TensorDesc<'_>> = names
        .iter()
        .map(|n| TensorDesc {
            name: n,
            ggml_type: GgmlType::F32,
            shape: &shape,
        })
        .collect();
    let p = plan(
        FileType::Q4_K_M,
        &facts(30, 9, 3),
        &tensors,
        &PlanOptions::default(),
    )
    .unwrap();
    let raised: Vec<u32> = (0..30)
        .filter(|&l| p.types[3 * l as usize] == GgmlType::Q6_K)
        .collect();
    // n/8 = 3, 7n/8 = 26: layers 0-2, 26-29, and (i - 3) % 3 == 2 → 5, 8, ..., 23.
    assert_eq!(raised, [0, 1, 2, 5, 8, 11, 14, 17, 20, 23, 26, 27, 28, 29]);
    for l in 0..30 {
        assert_eq!(p.types[3 * l + 1], p.types[3 * l], "ffn_down of layer {l}");
        assert_eq!(p.types[3 * l + 2], GgmlType::Q4_K);
    }
}

#[test]
fn the_two_bit_i_quants_need_an_importance_matrix_except_for_the_embeddings() {
    let shape = [512u64, 512];
    let t = |name| TensorDesc {
        name,
        ggml_type: GgmlType::F16,
        shape: &shape,
    };
    let tensors = [
        t("output.weight"),
        t("token_embd.weight"),
        t("blk.0.attn_q.weight"),
    ];
    let p = plan(
        FileType::IQ2_XXS,
        &facts(1, 8, 8),
        &tensors,
        &PlanOptions::default(),
    )
    .unwrap();
    assert_eq!(p.types, [GgmlType::Q5_K, GgmlType::Q2_K, GgmlType::IQ2_XXS]);
    assert_eq!(p.requires_imatrix, [false, false, true]);
    // Q2_K needs one only in a Q2_K_S file.
    let p = plan(
        FileType::Q2_K_S,
        &facts(1, 8, 8),
        &tensors[2..],
        &PlanOptions::default(),
    )
    .unwrap();
    assert_eq!((p.types[0], p.requires_imatrix[0]), (GgmlType::Q2_K, true));
    let p = plan(
        FileType::Q2_K,
        &facts(1, 8, 8),
        &tensors[2..],
        &PlanOptions::default(),
    )
    .unwrap();
    assert_eq!((p.types[0], p.requires_imatrix[0]), (GgmlType::Q2_K, false));
}

#[test]
fn rows_that_do_not_fit_fall_back() {
    let odd = [96u64, 8];
    let t = [TensorDesc {
        name: "blk.0.attn_q.weight",
        ggml_type: GgmlType::F32,
        shape: &odd,
    }];
    let p = plan(
        FileType::Q4_K_S,
        &facts(1, 1, 1),
        &t,
        &PlanOptions::default(),
    )
    .unwrap();
    assert_eq!(p.types, [GgmlType::Q5_0]);
    assert_eq!(p.fallbacks, [(0, GgmlType::Q4_K, GgmlType::Q5_0)]);
    let odd = [40u64, 8];
    let t = [TensorDesc {
        name: "blk.0.attn_q.weight",
        ggml_type: GgmlType::F32,
        shape: &odd,
    }];
    let p = plan(FileType::Q6_K, &facts(1, 1, 1), &t, &PlanOptions::default()).unwrap();
    assert_eq!(p.types, [GgmlType::F16]);
}
