// Drives a day0 serve endpoint with the official openai Node.js client: completions and chat
// completions, streamed (with stream_options.include_usage) and not, greedy; and n = 2 seeded
// choices streamed. Prints one JSON
// object with what each call returned; any response the client cannot parse throws, and the
// process exits non-zero. Usage: node client.mjs BASE_URL MODEL PROMPT_IDS_JSON MESSAGES_JSON N
import OpenAI from "openai";

const [baseURL, model, promptIdsJson, messagesJson, maxTokensText] = process.argv.slice(2);
const promptIds = JSON.parse(promptIdsJson);
const messages = JSON.parse(messagesJson);
const maxTokens = Number(maxTokensText);
const client = new OpenAI({ baseURL, apiKey: "day0-needs-no-key", maxRetries: 0, timeout: 120000 });
// day0/vLLM extensions ride along as extra body fields.
const greedy = { temperature: 0, ignore_eos: true, max_tokens: maxTokens };

function check(condition, what) {
    if (!condition) {
        throw new Error(`check failed: ${what}`);
    }
}

async function completion() {
    const r = await client.completions.create({ model, prompt: promptIds, ...greedy });
    check(r.object === "text_completion", "completion object");
    check(r.choices.length === 1 && typeof r.choices[0].text === "string", "completion choice");
    return { tokens: r.choices[0].token_ids, text: r.choices[0].text,
        finish: r.choices[0].finish_reason, usage: r.usage };
}

async function completionStream() {
    const stream = await client.completions.create({ model, prompt: promptIds, ...greedy,
        stream: true, stream_options: { include_usage: true } });
    const out = { tokens: [], text: "", finish: null, usage: null, chunks: 0 };
    for await (const chunk of stream) {
        out.chunks += 1;
        if (chunk.usage) {
            check(chunk.choices.length === 0, "the usage chunk has no choices");
            out.usage = chunk.usage;
            continue;
        }
        const c = chunk.choices[0];
        out.tokens.push(...(c.token_ids ?? []));
        out.text += c.text;
        out.finish = c.finish_reason ?? out.finish;
    }
    return out;
}

async function chat() {
    const r = await client.chat.completions.create({ model, messages, ...greedy });
    check(r.object === "chat.completion", "chat object");
    const c = r.choices[0];
    check(c.message.role === "assistant", "assistant message");
    return { tokens: c.token_ids, text: c.message.content, finish: c.finish_reason, usage: r.usage };
}

async function chatStream() {
    const stream = await client.chat.completions.create({ model, messages, ...greedy,
        stream: true, stream_options: { include_usage: true } });
    const out = { tokens: [], text: "", finish: null, usage: null, chunks: 0, role: null };
    for await (const chunk of stream) {
        out.chunks += 1;
        check(chunk.object === "chat.completion.chunk", "chunk object");
        if (chunk.usage) {
            out.usage = chunk.usage;
            continue;
        }
        const c = chunk.choices[0];
        out.role = out.role ?? c.delta.role ?? null;
        out.tokens.push(...(c.token_ids ?? []));
        out.text += c.delta.content ?? "";
        out.finish = c.finish_reason ?? out.finish;
    }
    return out;
}

// n = 2 seeded choices, streamed: each choice's chunks carry its index; the tokens of each
// choice are collected apart (the test compares them with single requests seeded seed + index).
async function choicesStream() {
    const stream = await client.completions.create({ model, prompt: promptIds, n: 2, seed: 5,
        temperature: 0.9, ignore_eos: true, max_tokens: maxTokens, stream: true,
        stream_options: { include_usage: true } });
    const out = { tokens: [[], []], finish: [null, null], usage: null };
    for await (const chunk of stream) {
        if (chunk.usage) {
            out.usage = chunk.usage;
            continue;
        }
        for (const c of chunk.choices) {
            check(c.index === 0 || c.index === 1, "choice index");
            out.tokens[c.index].push(...(c.token_ids ?? []));
            out.finish[c.index] = c.finish_reason ?? out.finish[c.index];
        }
    }
    return out;
}

const models = await client.models.list();
const result = {
    models: models.data.map((m) => m.id),
    completion: await completion(),
    completionStream: await completionStream(),
    chat: await chat(),
    chatStream: await chatStream(),
    choicesStream: await choicesStream(),
};
process.stdout.write(JSON.stringify(result) + "\n");
