// SDK oracle for the Responses API with the official `openai` Node SDK.
//
// Usage: node openai_responses.mjs SCENARIO, with LADLE_BASE_URL,
// LADLE_API_KEY (default sk-test) and LADLE_MODEL_NAME (default m); the SDK
// from target/sdk-node (`bash .ci/sdk-node` makes it). Prints one line of JSON
// saying what the SDK parsed; tests/api/openai/responses.rs asserts on it.
import { createRequire } from "node:module";
import path from "node:path";

const require = createRequire(path.resolve("target/sdk-node/package.json"));
const OpenAI = require("openai");

const client = new OpenAI({
  baseURL: process.env.LADLE_BASE_URL,
  apiKey: process.env.LADLE_API_KEY ?? "sk-test",
  maxRetries: 0,
  timeout: 20000,
});
const model = process.env.LADLE_MODEL_NAME ?? "m";

async function create() {
  const response = await client.responses.create({ model, input: "番茄炒蛋怎么做？" });
  return { status: response.status, output_text: response.output_text, id: response.id };
}

async function stream() {
  const events = await client.responses.create({ model, input: "番茄炒蛋怎么做？", stream: true });
  const types = [];
  const numbers = [];
  let text = "";
  for await (const event of events) {
    types.push(event.type);
    numbers.push(event.sequence_number);
    if (event.type === "response.output_text.delta") text += event.delta;
  }
  return { types, numbers, text };
}

async function background() {
  const events = await client.responses.create({
    model,
    input: "番茄炒蛋怎么做？",
    background: true,
    stream: true,
  });
  let id = null;
  let last = null;
  let before = "";
  const numbers = [];
  for await (const event of events) {
    numbers.push(event.sequence_number);
    if (event.type === "response.created") id = event.response.id;
    last = event.sequence_number;
    if (event.type === "response.output_text.delta") {
      before += event.delta;
      if (before.length >= 3) break;
    }
  }
  const resumed = await client.responses.retrieve(id, { stream: true, starting_after: last });
  let after = "";
  let status = null;
  for await (const event of resumed) {
    numbers.push(event.sequence_number);
    if (event.type === "response.output_text.delta") after += event.delta;
    if (event.type === "response.completed") status = event.response.status;
  }
  const cancelled = await client.responses.cancel(id);
  const retrieved = await client.responses.retrieve(id);
  return { before, after, numbers, status, after_cancel: cancelled.status, retrieved: retrieved.output_text };
}

async function failed() {
  try {
    await client.responses.create({ model, input: "番茄炒蛋怎么做？" });
    return { class: null };
  } catch (error) {
    return { class: error.constructor.name, status: error.status };
  }
}

async function deleted() {
  const response = await client.responses.create({ model, input: "番茄炒蛋怎么做？" });
  const retrieved = await client.responses.retrieve(response.id);
  const gone = await client.responses.delete(response.id);
  let after = 200;
  try {
    await client.responses.retrieve(response.id);
  } catch (error) {
    after = error.status;
  }
  return { retrieved: retrieved.output_text, deleted: gone ?? null, after };
}

const scenarios = { create, stream, background, failed, deleted };
console.log(JSON.stringify(await scenarios[process.argv[2]]()));
