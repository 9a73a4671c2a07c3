"use strict";
// Preloaded into the jsii Node.js kernel by gpucluster_cdk/constructs_lib/cdk.py (NODE_OPTIONS=--require, set for
// the kernel's start only). A prebuilt provider binding's lib/index.js is one line per resource,
// `exports.<name> = require("./<module>");` (cdktf) or
// `exports.<name> = __importStar(require("./<module>/index"));` (cdktn): requiring it compiles all
// ~1,500 azurerm resource modules (185 MB of JavaScript, ~2 s) although a stack uses a dozen.
// For the packages named in GPUCLUSTER_LAZY_JS_PACKAGES (comma-separated `<npm name>@<version>`),
// each such line becomes a getter that requires its module on first access and then keeps the
// value. The jsii kernel finds a type by walking the package's exports
// (`closure[namespace][Class]`, jsii >= 1.19 weaves runtime type information into the classes, so
// nothing enumerates the exports), so a type is loaded exactly when the kernel first needs it.
//
// Guards (any of them failing: the file is compiled unchanged, the plain path): the package.json
// beside lib/ has exactly the version named (the binding releases whose index.js shape was
// checked: gpucluster_cdk/distributions.py), and Node.js has Module.prototype._compile (the
// undocumented hook of Node's CommonJS loader this file wraps). Any other line and any other file
// is compiled unchanged.
const Module = require("module");
const fs = require("fs");
const path = require("path");

const wanted = new Map();
for (const entry of (process.env.GPUCLUSTER_LAZY_JS_PACKAGES || "").split(",")) {
  const at = entry.lastIndexOf("@");
  if (at > 0) {
    wanted.set(path.join("node_modules", entry.slice(0, at), "lib", "index.js"), entry.slice(at + 1));
  }
}
const LINE = /^exports\.([A-Za-z_$][A-Za-z0-9_$]*) = ((?:__importStar\()?require\("\.\/[^"]+"\)\)?);$/gm;

function lazy(source) {
  return source.replace(LINE, (whole, name, expr) =>
    `Object.defineProperty(exports, ${JSON.stringify(name)}, { configurable: true, enumerable: true, get: function () {` +
    ` const value = ${expr}; Object.defineProperty(exports, ${JSON.stringify(name)},` +
    ` { configurable: true, enumerable: true, writable: true, value: value }); return value; } });`);
}

function pinnedVersion(filename) {
  for (const [suffix, version] of wanted) {
    if (filename.endsWith(path.sep + suffix)) {
      return version;
    }
  }
  return null;
}

function installedVersion(filename) {
  try {
    return JSON.parse(fs.readFileSync(path.join(path.dirname(filename), "..", "package.json"), "utf8")).version;
  } catch {
    return null;
  }
}

const compile = Module.prototype._compile;
if (typeof compile === "function" && wanted.size > 0) {
  Module.prototype._compile = function (content, filename) {
    if (typeof filename === "string") {
      const version = pinnedVersion(filename);
      if (version !== null && installedVersion(filename) === version) {
        content = lazy(content);
      }
    }
    return compile.call(this, content, filename);
  };
}
