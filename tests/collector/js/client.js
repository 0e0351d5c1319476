// A RAG service instrumented by hand with the official OpenTelemetry JS SDK, sending OpenInference
// attributes over OTLP/HTTP (protobuf), as a Node.js team would point it at `ragtrace serve`.
// Usage: node client.js < plan.json ; plan = {endpoint, token, release, attributeLimit|null, traces: [
//   {queryId, query, candidates: [[id, text], ...], reranked: [ids], shown: [ids], answer}]}
// Prints one JSON line per trace: {queryId, traceId}.
"use strict";
const { context, trace } = require("@opentelemetry/api");
const { BasicTracerProvider, BatchSpanProcessor } = require("@opentelemetry/sdk-trace-base");
const { OTLPTraceExporter } = require("@opentelemetry/exporter-trace-otlp-proto");
const { resourceFromAttributes } = require("@opentelemetry/resources");

function documents(prefix, docs) {
  const out = {};
  docs.forEach(([id, text, score], i) => {
    out[`${prefix}.${i}.document.id`] = id;
    out[`${prefix}.${i}.document.content`] = text;
    if (score !== undefined) out[`${prefix}.${i}.document.score`] = score;
  });
  return out;
}

async function main() {
  const plan = JSON.parse(require("fs").readFileSync(0, "utf8"));
  const limits = plan.attributeLimit ? { attributeCountLimit: plan.attributeLimit } : undefined;  // else 128
  const exporter = new OTLPTraceExporter({ url: `${plan.endpoint}/v1/traces`,
                                           headers: { authorization: `Bearer ${plan.token}` } });
  const provider = new BasicTracerProvider({
    resource: resourceFromAttributes({ "service.name": "js-rag", "service.version": plan.release }),
    spanLimits: limits, spanProcessors: [new BatchSpanProcessor(exporter)],
  });
  const tracer = provider.getTracer("js-rag");
  for (const t of plan.traces) {
    const byId = Object.fromEntries(t.candidates.map((c) => [c[0], c]));
    const root = tracer.startSpan("answer", { attributes: {
      "openinference.span.kind": "CHAIN", "input.value": t.query, "output.value": t.answer,
      metadata: JSON.stringify({ query_id: t.queryId }) } });
    const ctx = trace.setSpan(context.active(), root);
    const scored = t.candidates.map(([id, text], i) => [id, text, 1 - i / 1000]);
    tracer.startSpan("retrieve", { attributes: { "openinference.span.kind": "RETRIEVER", "input.value": t.query,
                                                ...documents("retrieval.documents", scored) } }, ctx).end();
    tracer.startSpan("rerank", { attributes: {
      "openinference.span.kind": "RERANKER", "reranker.query": t.query, "reranker.top_k": t.shown.length,
      ...documents("reranker.input_documents", scored),
      ...documents("reranker.output_documents", t.reranked.map((id) => byId[id])) } }, ctx).end();
    const prompt = "Answer from these passages:\n\n" + t.shown.map((id) => byId[id][1]).join("\n\n");
    tracer.startSpan("generate", { attributes: {
      "openinference.span.kind": "LLM",
      "llm.input_messages.0.message.role": "system", "llm.input_messages.0.message.content": prompt,
      "llm.input_messages.1.message.role": "user", "llm.input_messages.1.message.content": t.query,
      "llm.output_messages.0.message.role": "assistant", "llm.output_messages.0.message.content": t.answer,
    } }, ctx).end();
    root.end();
    process.stdout.write(JSON.stringify({ queryId: t.queryId, traceId: root.spanContext().traceId }) + "\n");
  }
  await provider.forceFlush();
  await provider.shutdown();
}

main().catch((err) => { console.error(err); process.exit(1); });
