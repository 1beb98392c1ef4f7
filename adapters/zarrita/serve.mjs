// zarrita as a long-lived conformance reader (the `serve` key, docs/plugins.md): Node.js and zarrita are
// loaded once, then each request is one JSON line on stdin, {"path": STORE_DIR, ...}, and each reply one
// JSON line on stdout, in request order: the model JSON read.mjs prints for that store, or, where read.mjs
// would exit 1 with one line on stderr, {"exit": 1, "stderr": THAT_LINE}. The worker ends at end of input.
//
//   node serve.mjs
import { createInterface } from "node:readline";
import { failure, readStore } from "./zarrita_model.mjs";

for await (const line of createInterface({ input: process.stdin, crlfDelay: Infinity })) {
  if (!line.trim()) continue;
  let reply;
  try {
    reply = await readStore(JSON.parse(line).path);
  } catch (err) {
    reply = JSON.stringify({ exit: 1, stderr: `${failure(err)}\n` });
  }
  process.stdout.write(`${reply}\n`);
}
