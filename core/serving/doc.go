// Package serving simulates LLM serving engines: requests arriving over
// time at replicas that batch them continuously, iteration by iteration,
// each iteration priced by the compute and network models (Pricer) for the
// batch it holds.
//
// # The scheduler (one per replica)
//
// It follows vLLM V1's Scheduler.schedule (vllm/v1/core/sched/scheduler.py):
// every iteration has a token budget (Config.MaxBatchedTokens, vLLM
// max_num_batched_tokens). Running requests come first, in order: each asks
// for its tokens not yet computed (a decode one, a partly prefilled prompt
// its rest), capped by ChunkTokens (long_prefill_token_threshold; Sarathi-
// Serve's chunk) and the budget left, and gets KV blocks for them. When the
// paged cache (Replica.Blocks blocks of Config.BlockTokens tokens, vLLM
// block_size) has too few free blocks, the last running request is preempted
// (self.running.pop(), FCFS) and put at the front of the waiting queue,
// until the request fits or preempts itself. Then, if nothing was preempted
// (vLLM), or if the preemptions left the batch empty (here: vLLM would
// admit at its next step), waiting requests are admitted in order while the
// budget, Config.MaxSeqs (max_num_seqs) and the free blocks allow; a new
// request first takes its cached prefix. An iteration's requests whose
// tokens are all computed sample one token at its end.
//
// Preemption "recompute" is vLLM V1's (num_computed_tokens = 0: prompt and
// generated tokens are computed again when readmitted); "swap" is vLLM V0's
// PreemptionMode.SWAP (vllm/core/scheduler.py): the victim's blocks go to
// host memory and come back on readmission, each copy at SwapBytesPerS and
// charged to the iteration that does it.
//
// Prefix caching follows vLLM's automatic prefix caching: the full blocks
// of a shared prefix (Request.Prefix) are cached once a request has computed
// them, referenced by the requests using them, kept after the last reference
// as evictable, and evicted least recently used when blocks are needed; a
// hit leaves at least the prompt's last token to compute. Config.PrefixHitRate
// instead takes a share of every prompt as cached (its blocks are counted
// as the request's own).
//
// TensorRT-LLM's in-flight batcher packs an iteration the same way
// (cpp/tensorrt_llm/batch_manager/microBatchScheduler.cpp): requests in
// generation first, one token each, then context requests, each chunk as
// much of its remaining prompt as the max_num_tokens budget left allows,
// first come first served (ContextChunkingPolicy FIRST_COME_FIRST_SERVED,
// its default), or whole prompts only when chunked context is off.
//
// # Pipeline-parallel replicas
//
// A replica of PP stages keeps up to PP iterations in flight, as vLLM V1's
// EngineCore does with its batch queue (vllm/v1/engine/core.py: "required
// by pipeline parallelism to eliminate pipeline bubbles", sized by the
// executor's max_concurrent_batches, the pipeline size). The scheduler
// forms the next iteration when the first stage is free, from the requests
// not already in an iteration in flight (the scheduler skips those, its
// scheduled_req_ids); each stage takes iterations in turn (Pricer.Stages
// prices each stage, its host issuing its own kernels), so a request's
// tokens come one pipeline traversal apart while the stages work on other
// requests. A preemption takes the last running request not in flight,
// and a request that would have to preempt itself while iterations in
// flight hold the blocks waits for them to end instead (nothing new is
// admitted meanwhile); a request preempted 1,000 times stops the run with
// an error, as a cache too small for the load.
//
// # Requests reach the scheduler after the frontend
//
// A request sent at Request.ArrivalS joins its replica's waiting queue
// after the API server has spent Config.FrontendS +
// Config.FrontendSPerToken·Prompt on it (HTTP and chat template, and
// tokenizing the prompt, which grows with it: one CPU thread of Hugging
// Face tokenizers encodes 1.3–4.2 MB/s with Llama 3.1's tokenizer,
// huggingface/tokenizers PRs #1582 and #1584, about 1–3 µs per token at
// some 4 bytes a token; the serving spec's default is
// spec.TokenizeSPerToken, 2.07 µs). The server takes one request at a
// time (vLLM's OpenAI server tokenizes on a single worker thread), one
// server a replica, so requests sent together reach the engine one
// tokenizing apart. Latencies count from the send, as client-side
// benchmark tools time them. The engine forms a batch from every request
// that has reached it by the instant the batch starts. A closed-loop client sends its next request when its
// previous one's last token is sampled. The scheduler admits new requests
// only when it forms an iteration, as TensorRT-LLM's executor loop does
// (Executor::Impl::executionLoop: wait for the running iteration, send its
// responses, fetch the queued requests, launch the next iteration), so a
// request its client sends on a response arrives while the next iteration
// runs and waits for its end; a frontend time that ends before that
// iteration does changes nothing.
//
// Closed-loop clients with fixed lengths are locked in iteration count: a
// request that keeps its place in the batch finishes exactly output − 1
// iterations after its first token, so the clients' next requests come in
// the order and iteration spacing of their previous first tokens. The
// frontend time, counted in decode steps, then decides which prefills
// queue behind which. A delay of one decode step (about 21 ms for a 70B
// model on 8 A100s) can move a request past a prefill iteration of about
// 1 s, so with long prompts the mean TTFT moves in steps (on the 20,000-
// token NVIDIA NIM row of bench's TestNIMServing, about 0.6 s per 20 ms
// of tokenizing, a decode step's worth).
//
// # The engine loop's own time
//
// Config.StepS + Config.StepSPerSeq·n (n the sequences an iteration holds)
// is CPU time of the engine loop that the GPUs wait for before the
// iteration's kernels start: scheduling, preparing the inputs, sampling and
// processing the outputs when the loop does them between iterations, as a
// synchronous loop does. It is 0 by default (an engine that hides it under
// the previous iteration); the serving spec's engine.step_overhead_s and
// engine.step_overhead_s_per_seq set it.
//
// # Replicas, routing, disaggregation
//
// Arrivals go to a replica by round robin, least outstanding requests, or
// KV-aware (NVIDIA Dynamo's KV router cost: prefill blocks not cached there
// plus the blocks of its outstanding requests). With prefill/decode
// disaggregation a request is prefilled on a Prefill replica, its first
// token sampled there, its KV cache sent to a Decode replica (by the
// routing policy) over the network, transfers into one replica one at a
// time, and the first token reaches the user when the transfer ends (as
// vLLM's disaggregated proxy streams from the decode instance).
//
// # Time
//
// Sim is event-driven over all replicas (arrivals, iteration ends, KV
// arrivals, closed-loop completions) with (time, sequence) order, so a run
// is deterministic. Iteration costs are memoized by shape (Pricer).
package serving
