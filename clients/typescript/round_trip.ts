// A round trip through the TypeScript client generated from the service's OpenAPI document (openapi-typescript
// types, openapi-fetch calls): an agent, an sms channel, a contact, a pipeline with a deal in it, a message sent
// to the contact and read back.
//
//   FRONTDESK_URL=http://127.0.0.1:8080 npm run generate && npm run check
//   FRONTDESK_URL=... FRONTDESK_API_KEY=fdk_... FRONTDESK_CHANNEL_CONFIG='{...}' npm run round-trip

import createClient from "openapi-fetch";

import type { paths } from "./generated/api.js";

function env(name: string): string {
  const value = process.env[name];
  if (value === undefined) {
    throw new Error(`${name} is not set`);
  }
  return value;
}

/** The answer of a call that must succeed. */
function expect<T>(result: { data?: T; error?: unknown; response: Response }): T {
  if (result.data === undefined) {
    throw new Error(`${result.response.status}: ${JSON.stringify(result.error)}`);
  }
  return result.data;
}

const client = createClient<paths>({
  baseUrl: env("FRONTDESK_URL"),
  headers: { "X-API-Key": env("FRONTDESK_API_KEY") },
});
const config = JSON.parse(env("FRONTDESK_CHANNEL_CONFIG")) as Record<string, string>;

const { agent } = expect(await client.POST("/v1/agents", { body: { name: "Front desk (TypeScript)" } }));
expect(await client.POST("/v1/channels", { body: { name: "sms", type: "sms", config } }));
const { contact } = expect(
  await client.POST("/v1/contacts", { body: { name: "Ravi Menon", phone: "+15555550102" } }),
);
const { pipeline } = expect(
  await client.POST("/v1/pipelines", {
    body: { id: "typescript", name: "TypeScript", stages: [{ id: "ts-lead", name: "Lead" }] },
  }),
);
const stage = pipeline.stages[0];
if (stage === undefined) {
  throw new Error("the pipeline has no stage");
}
const { deal } = expect(
  await client.POST("/v1/deals", {
    body: { title: "Annual plan", stage: stage.id, contact_id: contact.id, value: 1200 },
  }),
);
const read = expect(await client.GET("/v1/deals/{deal_id}", { params: { path: { deal_id: deal.id } } }));
if (read.deal.pipeline_id !== pipeline.id) {
  throw new Error(`the deal is in ${read.deal.pipeline_id}`);
}
const sent = expect(
  await client.POST("/v1/contacts/{contact_id}/send-message", {
    params: { path: { contact_id: contact.id } },
    body: { text: "Your plan is ready", channel: "sms" },
  }),
);
const { message } = expect(
  await client.GET("/v1/messages/{message_id}", { params: { path: { message_id: sent.message_id } } }),
);
if (message.text !== "Your plan is ready") {
  throw new Error(`read back ${JSON.stringify(message)}`);
}
console.log(`round trip ok: agent ${agent.id}, deal ${deal.id} in ${pipeline.id}, message ${message.id}`);
