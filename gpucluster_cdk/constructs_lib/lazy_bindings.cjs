"use strict";
// Preloaded into the jsii Node.js kernel by gpucluster_cdk/constructs_lib/cdk.py (NODE_OPTIONS=--require, set for
// the kernel's start only). A prebuilt provider binding's lib/index.js is one line per resource,
// `exports.<name> = require("./<module>");` (cdktf) or
// `exports.<name> = __importStar(require("./<module>/index"));` (cdktn): requiring it compiles all
// ~1,500 azurerm resource modules (185 MB of JavaScript, ~2 s) although a stack uses a dozen.
// For the packages named in GPUCLUSTER_LAZY_JS_PACKAGES (comma-separated npm names), each such line
// becomes a getter that requires its module on first access and then keeps the value. The jsii
// kernel finds a type by walking the package's exports (`closure[namespace][Class]`, jsii >= 1.19
// weaves runtime type information into the classes, so nothing enumerates the exports), so a type
// is loaded exactly when the kernel first needs it. Any other line and any other file is
// compiled unchanged.
const Module = require("module");
const path = require("path");

const packages = (process.env.GPUCLUSTER_LAZY_JS_PACKAGES || "").split(",").filter(Boolean);
const suffixes = packages.map((name) => path.join("node_modules", name, "lib", "index.js"));
const LINE = /^exports\.([A-Za-z_$][A-Za-z0-9_$]*) = ((?:__importStar\()?require\("\.\/[^"]+"\)\)?);$/gm;

function lazy(source) {
  return source.replace(LINE, (whole, name, expr) =>
    `Object.defineProperty(exports, ${JSON.stringify(name)}, { configurable: true, enumerable: true, get: function () {` +
    ` const value = ${expr}; Object.defineProperty(exports, ${JSON.stringify(name)},` +
    ` { configurable: true, enumerable: true, writable: true, value: value }); return value; } });`);
}

const compile = Module.prototype._compile;
Module.prototype._compile = function (content, filename) {
  if (typeof filename === "string") {
    if (suffixes.some((suffix) => filename.endsWith(path.sep + suffix))) {
      content = lazy(content);
    }
  }
  return compile.call(this, content, filename);
};
