// NZ's validate.js (tests/zarr3/nz_peer/, unchanged) run once per data file, all in one Node.js process:
// tests/zarr3/test_nz.py's `theirs` fixture. Why: a Node.js start per document cost more than the rest of
// that file. Usage: node nz_validate_each.mjs SCHEMA.json, then one data file path a line on stdin; for each,
// one line {"code": N} on stdout, N the exit code validate.js chose (0 valid, 1 invalid), or an error's text.
// Each run imports validate.js afresh (its own module URL: its top level runs again, compiling the schema
// as it does alone) with process.argv as `node validate.js SCHEMA DATA`; its process.exit is caught here.
// test_the_validator_run_alone_agrees_with_the_run_in_one_process compares the two ways on valid and
// invalid documents.
import readline from "readline";

const node = process.argv[0];
const schema = process.argv[2];
const reply = process.stdout.write.bind(process.stdout);

class Exit {
  constructor(code) {
    this.code = code;
  }
}

console.log = () => {}; // validate.js's own words; its exit code is the verdict
process.exit = (code) => {
  throw new Exit(code ?? 0);
};

let run = 0;
for await (const line of readline.createInterface({ input: process.stdin })) {
  process.argv = [node, "validate.js", schema, line];
  let code = "validate.js ended without choosing an exit code";
  try {
    await import(`./validate.js?run=${run++}`);
  } catch (error) {
    code = error instanceof Exit ? error.code : String(error);
  }
  reply(JSON.stringify({ code }) + "\n");
}
