// zarrita (the JavaScript Zarr library, npm "zarrita") as a pure-Zarr conformance reader: every array of a
// directory store and every attribute, read by zarrita, as the canonical model JSON
// (docs/contracts/model.md). Shared by read.mjs (one store per Node process) and serve.mjs (a worker that
// reads one store per request line), so both print the same JSON for a store. Language-neutral on
// purpose: nothing of nczarr_conformance is used.
//
// zarrita and @zarrita/storage are loaded from $NCZ_ZARRITA_DIR (default ~/.cache/nczarr-zarrita, where
// scripts/test installs them with npm), so the checkout holds no node_modules. zarrita lists no hierarchy
// of a store without consolidated metadata, so the groups and arrays are found by walking the directory
// for .zgroup/.zarray keys (Zarr v2) or zarr.json's node_type (Zarr v3), each spec's own layout; what each
// holds is zarrita's reading.
// A pure-Zarr reader knows no netCDF dimensions: each variable has none. Storage bookkeeping attributes
// (_nczarr*, _NCZARR*, _ARRAY_DIMENSIONS, _NCProperties) are not user data and are left out.
import { readdirSync, existsSync, readFileSync } from "node:fs";
import { homedir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";

const base = process.env.NCZ_ZARRITA_DIR || join(homedir(), ".cache", "nczarr-zarrita");

async function load(name) {
  const dir = join(base, "node_modules", ...name.split("/"));
  const pkg = JSON.parse(readFileSync(join(dir, "package.json"), "utf8"));
  const entry = pkg.exports?.["."]?.import ?? pkg.module ?? pkg.main;
  return import(pathToFileURL(join(dir, entry)).href);
}

const NCTYPES = { int8: "byte", uint8: "ubyte", int16: "short", uint16: "ushort", int32: "int", uint32: "uint",
  int64: "int64", uint64: "uint64", float32: "float", float64: "double", bool: "ubyte" };

function hidden(name) {
  return name.startsWith("_nczarr") || name.startsWith("_NCZARR") || name === "_ARRAY_DIMENSIONS"
    || name === "_NCProperties" || name === "_FillValue";
}

function number(v) {
  if (typeof v === "bigint") return v;
  if (typeof v !== "number") return v;
  if (Number.isNaN(v)) return "NaN";
  if (v === Infinity) return "Infinity";
  if (v === -Infinity) return "-Infinity";
  return v;
}

function attribute(value) {
  if (typeof value === "string") return { type: "char", value };
  const items = Array.isArray(value) ? value : [value];
  if (Array.isArray(value) && items.length && items.every((v) => typeof v === "string")) return { type: "string", value: items };
  if (items.length && items.every((v) => typeof v === "number" && Number.isInteger(v))) return { type: "int64", value: items };
  if (items.length && items.every((v) => typeof v === "number")) return { type: "double", value: items.map(number) };
  return { type: "char", value: JSON.stringify(value) };
}

function attributes(attrs) {
  return Object.fromEntries(Object.entries(attrs ?? {}).filter(([k]) => !hidden(k)).map(([k, v]) => [k, attribute(v)]));
}

function nest(flat, shape) {
  if (shape.length === 0) return flat[0];
  const step = shape.slice(1).reduce((a, b) => a * b, 1);
  return Array.from({ length: shape[0] }, (_, i) => nest(flat.slice(i * step, (i + 1) * step), shape.slice(1)));
}

// the items of `flat` (as zarrita's chunk holds them, laid out by its `stride`) in C order: an array stored in
// Fortran order (Zarr v2 "order": "F", a v3 transpose codec) comes back with Fortran strides, not transposed
function cOrder(flat, shape, stride) {
  if (!stride || shape.length < 2) return flat;
  const out = new Array(flat.length);
  const index = new Array(shape.length).fill(0);
  for (let n = 0; n < flat.length; n++) {
    out[n] = flat[index.reduce((at, i, d) => at + i * stride[d], 0)];
    for (let d = shape.length - 1; d >= 0 && ++index[d] === shape[d]; d--) index[d] = 0;
  }
  return out;
}

async function variable(zarr, location) {
  const arr = await zarr.open(location, { kind: "array" });
  const got = await zarr.get(arr);
  // an array of shape [] comes back as its one value, not as a chunk
  const chunk = arr.shape.length === 0 && (got === null || typeof got !== "object" || !("data" in got))
    ? { data: [got] } : got;
  const dtype = String(arr.dtype);
  let type = NCTYPES[dtype];
  let flat;
  if (type) {
    flat = Array.from(chunk.data, number);
  } else if (/^v2:S1$/.test(dtype) || dtype === "v2:|S1" ) {
    type = "char";
    flat = Array.from({ length: chunk.data.length }, (_, i) => (chunk.data.get ? chunk.data.get(i) : chunk.data[i]) || "\u0000");
  } else if (/^v2:[SU]\d+$|^v2:object$|^string$/.test(dtype)) {
    type = "string";
    flat = Array.from({ length: chunk.data.length }, (_, i) => String(chunk.data.get ? chunk.data.get(i) : chunk.data[i]));
  } else {
    throw new Error(`data type ${dtype} not handled by this adapter`);
  }
  flat = cOrder(flat, [...arr.shape], chunk.stride);
  return { type, dimensions: [], shape: [...arr.shape], attributes: attributes(arr.attrs), data: nest(flat, [...arr.shape]) };
}

// "array", "group" or null: a Zarr v2 node by its .zarray/.zgroup key, a Zarr v3 one by its zarr.json's node_type
function nodeType(dir) {
  if (existsSync(join(dir, ".zarray"))) return "array";
  if (existsSync(join(dir, ".zgroup"))) return "group";
  if (!existsSync(join(dir, "zarr.json"))) return null;
  try {
    const kind = JSON.parse(readFileSync(join(dir, "zarr.json"), "utf8")).node_type;
    return kind === "array" || kind === "group" ? kind : null;
  } catch {
    return null;
  }
}

async function group(zarr, root, dir, path) {
  const grp = await zarr.open(root.resolve(path), { kind: "group" });
  const out = { dimensions: {}, attributes: attributes(grp.attrs), variables: {}, groups: {} };
  for (const name of readdirSync(dir).sort()) {
    const sub = join(dir, name);
    const key = path === "/" ? `/${name}` : `${path}/${name}`;
    const kind = nodeType(sub);
    if (kind === "array") out.variables[name] = await variable(zarr, root.resolve(key));
    else if (kind === "group") out.groups[name] = await group(zarr, root, sub, key);
  }
  return out;
}

function replacer(_key, value) {
  return typeof value === "bigint" ? `@@${value}@@` : value;
}

let libraries = null;

// zarrita and its file-system store, imported once per process
async function libraries_() {
  if (libraries === null) {
    const zarr = await load("zarrita");
    const { FileSystemStore } = await load("@zarrita/storage");
    libraries = { zarr, FileSystemStore };
  }
  return libraries;
}

// the model JSON of the directory store `dir`, as one line (JSON.stringify writes no newline); 64-bit
// integers exactly: JSON numbers, not doubles. Throws what zarrita throws.
export async function readStore(dir) {
  const { zarr, FileSystemStore } = await libraries_();
  const root = zarr.root(new FileSystemStore(dir));
  const model = { model: "nczarr-model/1", root: await group(zarr, root, dir, "/") };
  return JSON.stringify(model, replacer).replace(/"@@(-?\d+)@@"/g, "$1");
}

// the one line a failure is said in: "zarrita: " and the first line of zarrita's message
export function failure(err) {
  return `zarrita: ${String(err?.message ?? err).split("\n")[0]}`;
}
