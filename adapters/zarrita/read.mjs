// zarrita as a one-shot conformance reader: the model JSON of one directory store on stdout
// (zarrita_model.mjs says what it holds). serve.mjs is the same reading as a long-lived worker.
//
//   node read.mjs STORE_DIR
//
// Exit 1 with one line on stderr when zarrita fails.
import { failure, readStore } from "./zarrita_model.mjs";

try {
  if (process.argv.length !== 3) {
    console.error("usage: node read.mjs STORE_DIR");
    process.exit(2);
  }
  process.stdout.write(await readStore(process.argv[2]));
} catch (err) {
  console.error(failure(err));
  process.exit(1);
}
