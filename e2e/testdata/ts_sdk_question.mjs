// A client on the official TypeScript ACP SDK (2.x, its ClientApp) that asks `starter acp`
// one prompt and answers the question the prompt makes the agent ask. Its elicitation
// handler runs only when the SDK accepts the elicitation/create tacp sent; it answers
// "dev". Driven by e2e/clients_test.go:
//   node ts_sdk_question.mjs SDK_DIR PROMPT -- STARTER ARGS...
// Prints one line per event: "asked <params>", "completed <params>", "stop <reason>",
// "text <agent text>".
import { spawn } from "node:child_process";
import { Readable, Writable } from "node:stream";
import { pathToFileURL } from "node:url";
import path from "node:path";

const [sdkDir, prompt, sep, starter, ...args] = process.argv.slice(2);
if (sep !== "--") throw new Error("usage: ts_sdk_question.mjs SDK_DIR PROMPT -- STARTER ARGS...");
const acp = await import(pathToFileURL(path.join(sdkDir, "dist/v1/stable/acp.js")).href);

const child = spawn(starter, args, { stdio: ["pipe", "pipe", "inherit"] });
const stream = acp.ndJsonStream(Writable.toWeb(child.stdin), Readable.toWeb(child.stdout));

const app = acp
  .client({ name: "ts-sdk-question" })
  .onRequest("elicitation/create", (cx) => {
    console.log("asked " + JSON.stringify(cx.params));
    return { action: "accept", content: { answer: "dev" } };
  })
  .onNotification("elicitation/complete", (cx) => {
    console.log("completed " + JSON.stringify(cx.params));
  })
  .onRequest("session/request_permission", (cx) => {
    const allow = cx.params.options.find((o) => o.kind.startsWith("allow")) ?? cx.params.options[0];
    return { outcome: { outcome: "selected", optionId: allow.optionId } };
  });

await app.connectWith(stream, async (cx) => {
  await cx.request("initialize", {
    protocolVersion: 1,
    clientCapabilities: { elicitation: { form: {}, url: {} } },
    clientInfo: { name: "ts-sdk", version: "2.4.0" },
  });
  const session = await cx.buildSession(process.cwd()).start();
  console.log("session " + session.sessionId);
  const res = await session.prompt(prompt);
  console.log("stop " + res.stopReason);
  session.dispose();
});
child.stdin.end();
child.kill();
