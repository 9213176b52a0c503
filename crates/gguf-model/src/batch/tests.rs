use super::*;
use crate::EncodeOptions;

fn model() -> Model {
    Model::load(gguf_test_support::fixture("model-llama.gguf")).unwrap()
}

fn options(n_ctx: usize) -> SessionOptions {
    SessionOptions {
        n_ctx,
        threads: 1,
        ..SessionOptions::default()
    }
}

fn request(prompt: &[u32], max_tokens: usize) -> GenerateRequest {
    GenerateRequest {
        logprobs: Some(2),
        ..GenerateRequest::new(prompt.to_vec(), SamplerConfig::greedy(), max_tokens)
    }
}

/// `text`'s tokens, with the special ones.
fn encode(model: &Model, text: &str) -> Vec<u32> {
    model
        .tokenizer()
        .encode(text.as_bytes(), EncodeOptions::ADD_AND_PARSE_SPECIAL)
}

/// Steps until idle; each request's events in order.
fn run(b: &mut Batcher<'_>) -> std::collections::HashMap<RequestId, Vec<Event>> {
    let mut events = std::collections::HashMap::<RequestId, Vec<Event>>::new();
    while !b.is_idle() {
        for out in b.step() {
            events.entry(out.request).or_default().push(out.event);
        }
    }
    events
}

/// The text a stream shows: every token's shown text, then the tail.
fn shown(events: &[Event]) -> String {
    let mut text = String::new();
    for e in events {
        match e {
            Event::Token { shown, .. } => text.push_str(shown),
            Event::Done(f) => text.push_str(&f.tail),
            _ => {}
        }
    }
    text
}

/// What a lone session generates, greedy, for `max_tokens` tokens.
fn alone(model: &Model, prompt: &[u32], max_tokens: usize) -> String {
    let mut session = model.session(options(128)).unwrap();
    let g = session
        .generate_from(prompt, &SamplerConfig::greedy(), max_tokens)
        .unwrap();
    g.complete().unwrap().text
}

/// Two requests in two slots, stepped together, each generate what a lone `Session`
/// generates; a third waits for a slot and takes the one whose cache holds its prompt's
/// prefix; a cancelled request ends with what it had and frees its slot.
#[test]
fn slots_generate_together_reuse_prefixes_and_cancel() {
    let model = model();
    let mut b = model.batcher(options(256), 2).unwrap();
    assert_eq!(b.n_ctx(), 128);
    let (pa, pb) = (
        encode(&model, "Once upon a time"),
        encode(&model, "The cat sat"),
    );
    let a = b.submit(request(&pa, 12)).unwrap();
    let c = b.submit(request(&pb, 12)).unwrap();
    assert_eq!((b.running(), b.waiting()), (2, 0));
    let events = run(&mut b);
    let (ea, eb) = (&events[&a], &events[&c]);
    assert_eq!(shown(ea), alone(&model, &pa, 12));
    assert_eq!(shown(eb), alone(&model, &pb, 12));
    for e in [ea, eb] {
        let logprobs: Vec<&TokenLogprob> = e
            .iter()
            .filter_map(|e| match e {
                Event::Token { logprob, .. } => logprob.as_ref(),
                _ => None,
            })
            .collect();
        let Some(Event::Done(done)) = e.last() else {
            panic!("{e:?}")
        };
        assert_eq!(done.reason, StopReason::MaxTokens);
        assert_eq!(logprobs.len(), done.completion_tokens);
        for l in logprobs {
            // Greedy: the token is the most likely one, listed first.
            assert_eq!(l.top.len(), 2);
            assert_eq!(l.top[0].logprob, l.chosen.logprob);
            assert!(l.chosen.logprob <= 0.0 && l.top[1].logprob <= l.chosen.logprob);
        }
    }
    // Both slots hold their conversations; a prompt continuing `pb` takes its slot.
    let seq_b = (0..2)
        .find(|&q| b.cached_tokens(q).starts_with(&pb))
        .unwrap();
    let mut longer = pb.clone();
    longer.extend(encode(&model, " on the mat").iter().skip(1));
    let cached_before = b.stats().prompt_tokens_cached;
    let d = b.submit(request(&longer, 4)).unwrap();
    assert!(b.slots[seq_b].as_ref().is_some_and(|r| r.id == d));
    assert_eq!(b.stats().prompt_tokens_cached - cached_before, pb.len());
    assert_eq!(shown(&run(&mut b)[&d]), alone(&model, &longer, 4));
    // Cancelled after two steps: its end, with the tokens it had, and the slot is free.
    let e = b.submit(request(&pa, 50)).unwrap();
    let mut tokens = 0;
    for _ in 0..2 {
        tokens += b
            .step()
            .iter()
            .filter(|o| o.request == e && matches!(o.event, Event::Token { .. }))
            .count();
    }
    let end = b.cancel(e).unwrap();
    assert_eq!(end.reason, StopReason::Cancelled);
    assert_eq!(end.completion_tokens, tokens);
    assert!(b.is_idle());
    assert!(b.cancel(e).is_none());
}

/// More requests than slots: the later ones wait, in order, and start as slots free; what
/// each generates is still what it generates alone.
#[test]
fn requests_beyond_the_slots_wait_and_generate_the_same() {
    let model = model();
    let mut b = model.batcher(options(256), 2).unwrap();
    let prompts =
        ["One day", "The dog", "A bird flew", "In the morning"].map(|t| encode(&model, t));
    let ids: Vec<RequestId> = prompts
        .iter()
        .enumerate()
        .map(|(i, p)| b.submit(request(p, 3 + 2 * i)).unwrap())
        .collect();
    assert_eq!((b.running(), b.waiting()), (2, 2));
    let events = run(&mut b);
    for (i, (id, p)) in ids.iter().zip(&prompts).enumerate() {
        assert_eq!(
            shown(&events[id]),
            alone(&model, p, 3 + 2 * i),
            "request {i}"
        );
    }
    assert_eq!(b.stats().completion_tokens, 3 + 5 + 7 + 9);
}

/// Refused at submission: an empty prompt, one longer than a slot's context, a bad sampler;
/// cancel_all ends a running request with its end and a waiting one without.
#[test]
fn bad_requests_are_refused_and_cancel_all_tells_running_from_waiting() {
    let model = model();
    let mut b = model.batcher(options(64), 1).unwrap();
    assert!(matches!(
        b.submit(request(&[], 4)),
        Err(ModelError::EmptyPrompt)
    ));
    assert!(matches!(
        b.submit(request(&[1; 65], 4)),
        Err(ModelError::ContextFull {
            needed: 65,
            n_ctx: 64
        })
    ));
    let mut bad = request(&[1, 2], 4);
    bad.sampler.temperature = f32::NAN;
    assert!(b.submit(bad).is_err());
    let first = b.submit(request(&[1, 2, 3], 40)).unwrap();
    let second = b.submit(request(&[1, 2], 40)).unwrap();
    b.step();
    let ended = b.cancel_all();
    assert_eq!(ended.len(), 2);
    assert_eq!(ended[0].0, first);
    assert_eq!(
        ended[0].1.as_ref().map(|f| f.reason),
        Some(StopReason::Cancelled)
    );
    assert_eq!(ended[1], (second, None));
    assert!(b.is_idle());
}

/// An embeddings request runs one input per step beside a generation, and gives the vectors a
/// lone session computes.
#[test]
fn embeddings_run_one_input_per_step_beside_generations() {
    let model = model();
    let mut b = model.batcher(options(256), 2).unwrap();
    let inputs = vec![
        encode(&model, "hello"),
        encode(&model, "a longer input here"),
    ];
    let e = b.submit_embeddings(inputs.clone(), EmbeddingOptions::default());
    let g = b.submit(request(&encode(&model, "Once"), 5)).unwrap();
    let first = b.step();
    assert!(first.iter().all(|o| o.request == g));
    assert_eq!(b.stats().steps, 1);
    let events = run(&mut b);
    let Some(Event::Embeddings(vectors)) = events[&e].first() else {
        panic!("{:?}", events[&e])
    };
    let mut lone = model.session(options(128)).unwrap();
    for (v, ids) in vectors.iter().zip(&inputs) {
        assert_eq!(*v, lone.embed_tokens(ids).unwrap());
    }
}
