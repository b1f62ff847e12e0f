#!/usr/bin/env node
// Rebuilds the Terraform provider schema of the resource and data source
// types a configuration uses from a CDK for Terraform prebuilt provider
// package (@cdktf/provider-google, @cdktf/provider-archive), and writes it in
// the JSON form of `terraform providers schema -json` (one provider).
//
// The prebuilt packages are generated from the real provider schema. Each
// module's TypeScript source (embedded in index.js's source map) states, for
// every attribute and nested block, its Terraform name, whether it is
// computed/optional/required, how it is read (which gives its type) and, in
// the *ToHclTerraform functions, whether it is a nested block and of which
// nesting (list, set, single). That is all `terraform validate` needs.
//
// Usage: node extract.js PACKAGE_DIR PROVIDER_SOURCE OUT.json TYPE...
//   PACKAGE_DIR      e.g. node_modules/@cdktf/provider-google
//   PROVIDER_SOURCE  e.g. registry.terraform.io/hashicorp/google
//   TYPE             resource types as-is (google_pubsub_topic) and data
//                    source types prefixed with "data." (data.google_project)
"use strict";

const fs = require("fs");
const path = require("path");

function die(msg) {
  process.stderr.write(`extract: ${msg}\n`);
  process.exit(2);
}

// moduleSource returns the TypeScript source a generated module was compiled
// from. Large resources keep their nested structs in index-structs/*.js; their
// sources are appended, so that every class is found by name.
function moduleSource(pkgDir, dir) {
  const file = path.join(pkgDir, "lib", dir, "index.js");
  if (!fs.existsSync(file)) return null;
  const parts = [tsOf(file)];
  const structs = path.join(pkgDir, "lib", dir, "index-structs");
  if (fs.existsSync(structs)) {
    for (const f of fs.readdirSync(structs).sort()) {
      if (/^structs\d+\.js$/.test(f)) parts.push(tsOf(path.join(structs, f)));
    }
  }
  return parts.join("\n");
}

function tsOf(file) {
  const js = fs.readFileSync(file, "utf8");
  const m = js.match(/sourceMappingURL=data:application\/json;base64,(\S+)\s*$/m);
  if (!m) die(`${file}: no inline source map`);
  const map = JSON.parse(Buffer.from(m[1], "base64").toString("utf8"));
  if (!map.sourcesContent || !map.sourcesContent[0]) die(`${file}: source map without sources`);
  return map.sourcesContent[0];
}

// Top-level declarations, each with the text up to the next one.
function declarations(src) {
  const re = /^export (?:class|function|interface) (\w+)/gm;
  const out = [];
  let m;
  while ((m = re.exec(src)) !== null) out.push({ name: m[1], start: m.index });
  for (let i = 0; i < out.length; i++) {
    out[i].text = src.slice(out[i].start, i + 1 < out.length ? out[i + 1].start : src.length);
  }
  return out;
}

// hclEntries parses the attrs object literal of a *ToHclTerraform function or
// of synthesizeHclAttributes: name -> {isBlock, type, storageClassType}.
function hclEntries(text) {
  const out = {};
  const re = /(\w+): \{\s*value: [\s\S]*?,\s*isBlock: (true|false),\s*type: "(\w+)",\s*storageClassType: "(\w+)",\s*\}/g;
  let m;
  while ((m = re.exec(text)) !== null) {
    out[m[1]] = { isBlock: m[2] === "true", type: m[3], storageClassType: m[4] };
  }
  return out;
}

const MEMBER_RE = /\/\/ (\w+) - computed: (true|false), optional: (true|false), required: (true|false)\n/g;

// members splits a class body into its documented attributes.
function members(classText) {
  const out = [];
  const marks = [];
  let m;
  MEMBER_RE.lastIndex = 0;
  while ((m = MEMBER_RE.exec(classText)) !== null) {
    marks.push({ name: m[1], computed: m[2] === "true", optional: m[3] === "true", required: m[4] === "true", start: m.index, bodyStart: m.index + m[0].length });
  }
  for (let i = 0; i < marks.length; i++) {
    const end = i + 1 < marks.length ? marks[i + 1].start : classText.length;
    out.push({ ...marks[i], text: classText.slice(marks[i].bodyStart, end) });
  }
  return out;
}

function scalarFromTsType(ts) {
  ts = ts.replace(/\s*\|\s*cdktf\.IResolvable/g, "").trim();
  switch (ts) {
    case "string":
      return "string";
    case "number":
      return "number";
    case "boolean":
      return "bool";
    case "string[]":
      return ["list", "string"];
    case "number[]":
      return ["list", "number"];
    case "boolean[]":
      return ["list", "bool"];
    case "{ [key: string]: string }":
      return ["map", "string"];
    case "{ [key: string]: number }":
      return ["map", "number"];
    case "{ [key: string]: boolean }":
      return ["map", "bool"];
    default:
      return null;
  }
}

class Extractor {
  constructor(src, where) {
    this.where = where;
    this.decls = new Map();
    for (const d of declarations(src)) this.decls.set(d.name, d);
    this.problems = [];
  }

  hclOf(structName) {
    const fn = this.decls.get(structName.charAt(0).toLowerCase() + structName.slice(1) + "ToHclTerraform");
    return fn ? hclEntries(fn.text) : {};
  }

  // block builds the schema block of a class whose settable members are
  // described by hcl (name -> isBlock/type).
  block(className, hcl, depth) {
    const decl = this.decls.get(className);
    if (!decl) {
      this.problems.push(`${this.where}: class ${className} not found`);
      return { attributes: {}, block_types: {} };
    }
    if (depth > 12) die(`${this.where}: nesting too deep at ${className}`);
    const attributes = {};
    const blockTypes = {};
    for (const mem of members(decl.text)) {
      const settable = hcl[mem.name];
      const nested = this.nestedOf(mem);
      if (nested) {
        const elemStruct = nested.elem;
        const elemHcl = this.hclOf(elemStruct);
        const inner = this.block(elemStruct + "OutputReference", elemHcl, depth + 1);
        if (settable && settable.isBlock) {
          let nesting = settable.type === "set" ? "set" : settable.type === "struct" ? "single" : "list";
          if (nested.kind === "list" && nested.wrapsSet) nesting = "set";
          const bt = { nesting_mode: nesting, block: inner };
          if (nesting !== "single") {
            if (mem.required) bt.min_items = 1;
            if (nested.kind === "single") bt.max_items = 1;
          }
          blockTypes[mem.name] = bt;
        } else {
          // Computed nested objects are attributes of object type.
          const obj = ["object", objectType(inner)];
          const t = nested.kind === "single" ? ["list", obj] : [nested.wrapsSet ? "set" : "list", obj];
          attributes[mem.name] = attr(t, mem);
        }
        continue;
      }
      if (settable && settable.isBlock) {
        // Provider classes keep nested blocks as plain arrays of structs.
        const sm = mem.text.match(/private _\w+\?: (\w+)\[\]/);
        if (sm) {
          blockTypes[mem.name] = { nesting_mode: settable.type === "set" ? "set" : "list", block: this.plainBlock(sm[1]) };
          continue;
        }
      }
      const t = this.scalarType(mem, settable);
      if (!t) {
        this.problems.push(`${this.where}: ${className}.${mem.name}: type not recognised in: ${mem.text.split("\n").slice(0, 3).join(" | ")}`);
        attributes[mem.name] = attr("dynamic", mem);
        continue;
      }
      attributes[mem.name] = attr(t, mem);
    }
    return { attributes, block_types: blockTypes };
  }

  // plainBlock builds a block from a struct interface and its
  // *ToHclTerraform function, for structs without an OutputReference class.
  plainBlock(structName) {
    const iface = this.decls.get(structName);
    const attributes = {};
    const blockTypes = {};
    for (const [name, e] of Object.entries(this.hclOf(structName))) {
      const camel = name.replace(/_(\w)/g, (_, c) => c.toUpperCase());
      const required = iface ? new RegExp(`readonly ${camel}: `).test(iface.text) : false;
      if (e.isBlock) {
        blockTypes[name] = { nesting_mode: e.type === "set" ? "set" : "list", block: { attributes: {}, block_types: {} } };
        continue;
      }
      const t = this.scalarType({ text: "" }, e) || "dynamic";
      attributes[name] = required ? { type: t, required: true } : { type: t, optional: true };
    }
    return { attributes, block_types: blockTypes };
  }

  nestedOf(mem) {
    let m = mem.text.match(/= new (\w+)OutputReference\(this, "(\w+)"\)/);
    if (m) return { kind: "single", elem: m[1] };
    m = mem.text.match(/= new (\w+)List\(this, "(\w+)", (true|false)\)/);
    if (m && !/^cdktf\./.test(m[1])) return { kind: "list", elem: m[1], wrapsSet: m[3] === "true" };
    return null;
  }

  scalarType(mem, settable) {
    const t = mem.text;
    let m = t.match(/= new cdktf\.(String|Number|Boolean|Any)Map\(this, "\w+"\)/);
    if (m) return ["map", { String: "string", Number: "number", Boolean: "bool", Any: "dynamic" }[m[1]]];
    m = t.match(/= new cdktf\.(String|Number|Boolean)MapList\(this, "\w+", (true|false)\)/);
    if (m) return [m[2] === "true" ? "set" : "list", ["map", { String: "string", Number: "number", Boolean: "bool" }[m[1]]]];
    const get = t.match(/public get \w+\(\)[^{]*\{\s*return ([^;]+);/);
    if (get) {
      const g = get[1];
      const isSet = /cdktf\.Fn\.tolist\(/.test(g);
      if (/getStringAttribute\(/.test(g)) return "string";
      if (/getNumberAttribute\(/.test(g)) return "number";
      if (/getBooleanAttribute\(/.test(g)) return "bool";
      if (/getNumberListAttribute\(/.test(g)) return [isSet ? "set" : "list", "number"];
      if (/getListAttribute\(/.test(g)) return [isSet ? "set" : "list", "string"];
      if (/getStringMapAttribute\(/.test(g)) return ["map", "string"];
      if (/getNumberMapAttribute\(/.test(g)) return ["map", "number"];
      if (/getBooleanMapAttribute\(/.test(g)) return ["map", "bool"];
      if (/getAnyMapAttribute\(/.test(g)) return ["map", "dynamic"];
      if (/interpolationForAttribute\(/.test(g)) return "dynamic";
    }
    // Provider classes keep plain fields: the declared TypeScript type tells.
    m = t.match(/private _\w+\?: ([^;]+);/);
    if (m) {
      const s = scalarFromTsType(m[1]);
      if (s) return s;
    }
    if (settable) {
      switch (settable.storageClassType) {
        case "string":
          return "string";
        case "number":
          return "number";
        case "boolean":
          return "bool";
        case "stringList":
          return [settable.type === "set" ? "set" : "list", "string"];
        case "numberList":
          return [settable.type === "set" ? "set" : "list", "number"];
        case "stringMap":
          return ["map", "string"];
      }
    }
    return null;
  }
}

function attr(type, mem) {
  const a = { type };
  if (mem.required) a.required = true;
  if (mem.optional) a.optional = true;
  if (mem.computed) a.computed = true;
  if (!a.required && !a.optional && !a.computed) a.optional = true;
  return a;
}

// objectType turns a block into the cty object type of its value.
function objectType(block) {
  const o = {};
  for (const [k, a] of Object.entries(block.attributes)) o[k] = a.type;
  for (const [k, b] of Object.entries(block.block_types)) {
    const inner = ["object", objectType(b.block)];
    o[k] = b.nesting_mode === "single" ? inner : [b.nesting_mode, inner];
  }
  return o;
}

// topLevel finds the class of a resource, data source or the provider itself
// and returns its schema block.
function topLevel(pkgDir, dir, kind, tfType) {
  const src = moduleSource(pkgDir, dir);
  if (src === null) return null;
  const ex = new Extractor(src, dir);
  const base = { resource: "cdktf.TerraformResource", data: "cdktf.TerraformDataSource", provider: "cdktf.TerraformProvider" }[kind];
  let cls = null;
  for (const d of ex.decls.values()) {
    if (new RegExp(`^export class ${d.name} extends ${base.replace(".", "\\.")}\\b`).test(d.text)) cls = d;
  }
  if (!cls) die(`${dir}: no class extending ${base}`);
  if (tfType) {
    const m = cls.text.match(/tfResourceType = "(\w+)"/);
    if (!m || m[1] !== tfType) return null;
  }
  const synth = cls.text.match(/synthesizeHclAttributes\(\)[\s\S]*?\n  \}\n/);
  const hcl = synth ? hclEntries(synth[0]) : {};
  const block = ex.block(cls.name, hcl, 0);
  for (const p of ex.problems) process.stderr.write(`extract: warning: ${p}\n`);
  return block;
}

function dirFor(kind, tfType, provider) {
  // google_pubsub_topic -> pubsub-topic; data: data-google-project.
  const rest = tfType.slice(provider.length + 1).replace(/_/g, "-");
  return kind === "data" ? `data-${provider}-${rest}` : rest;
}

// findDir scans every module for the one declaring tfType, for the rare type
// whose module name does not follow the usual rule.
function findDir(pkgDir, kind, tfType) {
  const lib = path.join(pkgDir, "lib");
  for (const dir of fs.readdirSync(lib)) {
    const f = path.join(lib, dir, "index.d.ts");
    if (!fs.existsSync(f)) continue;
    const dts = fs.readFileSync(f, "utf8");
    if (dts.includes(`static readonly tfResourceType = "${tfType}"`)) {
      const isData = /extends cdktf\.TerraformDataSource/.test(dts);
      if ((kind === "data") === isData) return dir;
    }
  }
  return null;
}

function main() {
  const [pkgDir, source, out, ...types] = process.argv.slice(2);
  if (!pkgDir || !source || !out) die("usage: node extract.js PACKAGE_DIR PROVIDER_SOURCE OUT.json TYPE...");
  const pkg = JSON.parse(fs.readFileSync(path.join(pkgDir, "package.json"), "utf8"));
  const providerName = source.split("/").pop();
  const providerBlock = topLevel(pkgDir, "provider", "provider", null);
  if (!providerBlock) die(`${pkgDir}: no provider module`);
  const schema = {
    format_version: "1.0",
    generated_from: `${pkg.name}@${pkg.version} (${(pkg.cdktf && pkg.cdktf.provider && pkg.cdktf.provider.name) || source} ${(pkg.cdktf && pkg.cdktf.provider && pkg.cdktf.provider.version) || "?"})`,
    provider_schemas: {
      [source]: {
        provider: { version: 0, block: providerBlock },
        resource_schemas: {},
        data_source_schemas: {},
      },
    },
  };
  const ps = schema.provider_schemas[source];
  let missing = 0;
  for (const t of [...new Set(types)].sort()) {
    const kind = t.startsWith("data.") ? "data" : "resource";
    const tfType = kind === "data" ? t.slice(5) : t;
    let block = topLevel(pkgDir, dirFor(kind, tfType, providerName), kind, tfType);
    if (!block) {
      const dir = findDir(pkgDir, kind, tfType);
      block = dir ? topLevel(pkgDir, dir, kind, tfType) : null;
    }
    if (!block) {
      process.stderr.write(`extract: ${kind === "data" ? "data source" : "resource"} type ${tfType} does not exist in ${pkg.name}@${pkg.version}\n`);
      missing++;
      continue;
    }
    (kind === "data" ? ps.data_source_schemas : ps.resource_schemas)[tfType] = { version: 0, block };
  }
  fs.writeFileSync(out, JSON.stringify(schema, null, 1));
  if (missing > 0) process.exit(1);
}

main();
