// zarrita as a long-lived conformance reader (the `serve` key, docs/plugins.md): Node.js and zarrita are
// loaded once, then each request is one JSON line on stdin, {"id": ID, "path": STORE_DIR, ...}, and each reply
// one JSON line on stdout carrying the request's id (serve protocol 2): {"id": ID, "stdout": MODEL_JSON}, the
// model JSON read.mjs prints for that store, or, where read.mjs would exit 1 with one line on stderr,
// {"id": ID, "exit": 1, "stderr": THAT_LINE}. The worker ends at end of input.
//
//   node serve.mjs
import { createInterface } from "node:readline";
import { failure, readStore } from "./zarrita_model.mjs";

for await (const line of createInterface({ input: process.stdin, crlfDelay: Infinity })) {
  if (!line.trim()) continue;
  const request = JSON.parse(line);
  let reply;
  try {
    reply = { id: request.id, stdout: await readStore(request.path) };
  } catch (err) {
    reply = { id: request.id, exit: 1, stderr: `${failure(err)}\n` };
  }
  process.stdout.write(`${JSON.stringify(reply)}\n`);
}
