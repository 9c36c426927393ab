// Flow editor help, as you type, over the plain textarea (which still works
// without this script; the server validates on save either way):
// - checks the definition against the flow schema of the API document
//   (GET /ui/flow-schema.json) and shows the first problems at their line
//   and column;
// - completes field names and enumerated values (step types, methods...)
//   inside a string: the suggestions show under the editor, Tab takes the
//   first, a click any;
// - numbers the lines, formats the JSON, and inserts expressions from the
//   captured sample and the last run at the cursor.
(function () {
  "use strict";
  var ta = document.getElementById("definition");
  if (!ta) return;
  var gutter = document.getElementById("editor-gutter");
  var status = document.getElementById("editor-status");
  var box = document.getElementById("editor-suggestions");
  var format = document.getElementById("editor-format");
  var schemas = {}, root = null;

  // --- positions -------------------------------------------------------
  function position(text, at) {
    var line = 1, col = 1;
    for (var i = 0; i < at && i < text.length; i++) {
      if (text[i] === "\n") { line++; col = 1; } else { col++; }
    }
    return { line: line, col: col };
  }

  // --- a JSON parser that keeps where each value and key starts ---------
  function parse(text) {
    var i = 0;
    function fail(msg) { throw { at: i, msg: msg }; }
    function ws() { while (i < text.length && " \t\r\n".indexOf(text[i]) >= 0) i++; }
    function str() {
      var start = i, out = "";
      i++;
      while (i < text.length && text[i] !== '"') {
        if (text[i] === "\\") {
          var e = text[i + 1];
          if (e === "u") {
            if (!/^[0-9a-fA-F]{4}$/.test(text.substr(i + 2, 4))) { i++; fail("bad \\u escape"); }
            out += String.fromCharCode(parseInt(text.substr(i + 2, 4), 16)); i += 6; continue;
          }
          var m = { '"': '"', "\\": "\\", "/": "/", b: "\b", f: "\f", n: "\n", r: "\r", t: "\t" }[e];
          if (m === undefined) { i++; fail("bad escape \\" + (e || "")); }
          out += m; i += 2; continue;
        }
        if (text[i] === "\n") fail("a string cannot span lines: a missing \"?");
        out += text[i++];
      }
      if (i >= text.length) { i = start; fail("this string is never closed"); }
      i++;
      return { type: "string", value: out, start: start };
    }
    function value() {
      ws();
      var start = i, c = text[i];
      if (c === "{") {
        i++; var node = { type: "object", start: start, keys: [] };
        ws();
        if (text[i] === "}") { i++; return node; }
        for (;;) {
          ws();
          if (text[i] !== '"') fail(text[i] === "}" ? "no field after this comma: remove the comma" : "expected a field name in double quotes");
          var k = str();
          ws();
          if (text[i] !== ":") fail("expected : after the field name");
          i++;
          var v = value();
          node.keys.push({ key: k.value, start: k.start, value: v });
          ws();
          if (text[i] === ",") { i++; continue; }
          if (text[i] === "}") { i++; return node; }
          fail("expected , or } (a missing comma?)");
        }
      }
      if (c === "[") {
        i++; var arr = { type: "array", start: start, items: [] };
        ws();
        if (text[i] === "]") { i++; return arr; }
        for (;;) {
          arr.items.push(value());
          ws();
          if (text[i] === ",") { i++; continue; }
          if (text[i] === "]") { i++; return arr; }
          fail("expected , or ] (a missing comma?)");
        }
      }
      if (c === '"') return str();
      var m = /^-?(0|[1-9]\d*)(\.\d+)?([eE][+-]?\d+)?/.exec(text.slice(i, i + 64));
      if (m && m[0]) { i += m[0].length; return { type: "number", value: Number(m[0]), start: start }; }
      var lits = { "true": true, "false": false, "null": null };
      for (var w in lits) {
        if (text.substr(i, w.length) === w) { i += w.length; return { type: w === "null" ? "null" : "boolean", value: lits[w], start: start }; }
      }
      if (i >= text.length) fail("the text ends before its value does (a missing } or ]?)");
      fail("unexpected " + JSON.stringify(c) + ": a value is a string in double quotes, a number, true, false, null, an object or an array");
    }
    var v = value();
    ws();
    if (i < text.length) fail("more after the definition's object: keep exactly one object");
    return v;
  }

  // --- the schema ------------------------------------------------------
  function resolve(s) {
    for (var n = 0; s && s.$ref && n < 8; n++) s = schemas[s.$ref.replace("#/components/schemas/", "")];
    return s || null;
  }
  // alternatives lists s or the branches of its oneOf/anyOf/allOf.
  function alternatives(s) {
    s = resolve(s);
    if (!s) return [];
    var alts = s.oneOf || s.anyOf || s.allOf;
    if (!alts) return [s];
    var out = [s];
    alts.forEach(function (a) { out = out.concat(alternatives(a)); });
    return out;
  }
  // schemaAt follows path (keys and indexes) from the root schema.
  function schemaAt(path) {
    var cur = [root];
    path.forEach(function (p) {
      var next = [];
      cur.forEach(function (s) {
        alternatives(s).forEach(function (a) {
          if (typeof p === "number") { if (a.items) next.push(a.items); }
          else if (a.properties && a.properties[p]) next.push(a.properties[p]);
        });
      });
      cur = next;
    });
    return cur;
  }
  function fieldsOf(list) {
    var out = [];
    list.forEach(function (s) {
      alternatives(s).forEach(function (a) {
        Object.keys(a.properties || {}).forEach(function (k) { if (out.indexOf(k) < 0) out.push(k); });
      });
    });
    return out;
  }
  function enumOf(list) {
    var out = [];
    list.forEach(function (s) {
      alternatives(s).forEach(function (a) { (a.enum || []).forEach(function (v) { if (out.indexOf(v) < 0) out.push(v); }); });
    });
    return out;
  }
  function pathText(path) {
    return path.map(function (p, i) { return typeof p === "number" ? "[" + p + "]" : (i ? "." : "") + p; }).join("");
  }
  function typeOk(want, node) {
    switch (want) {
      case "integer": return node.type === "number" && Number.isInteger(node.value);
      case "number": case "string": case "boolean": case "object": case "array": case "null": return node.type === want;
    }
    return true;
  }
  // check lists what the schema refuses in node, with where.
  function check(node, s, path, out) {
    s = resolve(s);
    if (!s || out.length >= 5) return;
    if (s.oneOf || s.anyOf) {
      // Any branch will do: check against the first whose type fits.
      var fit = (s.oneOf || s.anyOf).map(resolve).filter(function (a) {
        return a && (!a.type || [].concat(a.type).some(function (t) { return typeOk(t, node); }));
      });
      if (!fit.length) out.push({ at: node.start, field: pathText(path), msg: "this value has none of the shapes the field takes" });
      else check(node, fit[0], path, out);
      return;
    }
    if (s.type && ![].concat(s.type).some(function (t) { return typeOk(t, node); })) {
      out.push({ at: node.start, field: pathText(path), msg: "want " + [].concat(s.type).join(" or ") + ", got " + node.type });
      return;
    }
    if (s.enum && s.enum.indexOf(node.value) < 0) {
      out.push({ at: node.start, field: pathText(path), msg: "want one of " + s.enum.join(", ") });
    }
    if (node.type === "object") {
      var props = s.properties || {}, seen = {};
      node.keys.forEach(function (k) {
        seen[k.key] = true;
        var p = path.concat([k.key]);
        if (props[k.key]) check(k.value, props[k.key], p, out);
        else if (s.additionalProperties === false && Object.keys(props).length) {
          out.push({ at: k.start, field: pathText(p), msg: "unknown field \"" + k.key + "\"" + (path.length ? " in " + pathText(path) : "") + nearest(k.key, Object.keys(props)) });
        } else if (typeof s.additionalProperties === "object") check(k.value, s.additionalProperties, p, out);
      });
      (s.required || []).forEach(function (r) {
        if (!seen[r]) out.push({ at: node.start, field: pathText(path.concat([r])), msg: "missing required field \"" + r + "\"" + (path.length ? " in " + pathText(path) : "") });
      });
    }
    if (node.type === "array" && s.items) {
      node.items.forEach(function (it, i) { check(it, s.items, path.concat([i]), out); });
    }
  }
  // nearest suggests the known name closest to a misspelt one.
  function nearest(name, known) {
    var best = "", bestD = 3;
    known.forEach(function (k) {
      var d = distance(name.toLowerCase(), k.toLowerCase());
      if (d < bestD) { best = k; bestD = d; }
    });
    return best ? ": did you mean \"" + best + "\"?" : "";
  }
  function distance(a, b) {
    var prev = [], cur, i, j;
    for (j = 0; j <= b.length; j++) prev[j] = j;
    for (i = 1; i <= a.length; i++) {
      cur = [i];
      for (j = 1; j <= b.length; j++) cur[j] = Math.min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] === b[j - 1] ? 0 : 1));
      prev = cur;
    }
    return prev[b.length];
  }

  // --- validation as you type -----------------------------------------
  function validate() {
    var text = ta.value, problems = [];
    status.removeAttribute("aria-busy");
    try {
      var doc = parse(text);
      if (root) check(doc, root, [], problems);
    } catch (e) {
      if (e && typeof e.at === "number") problems.push({ at: e.at, msg: "not valid JSON: " + e.msg });
      else throw e;
    }
    status.textContent = "";
    status.classList.toggle("ok", !problems.length);
    if (!problems.length) {
      status.textContent = root ? "No problems found." : "";
      ta.removeAttribute("aria-invalid");
      status.removeAttribute("data-line");
      return;
    }
    ta.setAttribute("aria-invalid", "true");
    problems.forEach(function (p, n) {
      var where = position(text, p.at);
      if (n === 0) { status.setAttribute("data-line", where.line); status.setAttribute("data-col", where.col); }
      var row = document.createElement("button");
      row.type = "button";
      row.className = "link problem";
      row.textContent = "Line " + where.line + ", column " + where.col + ": " + (p.field ? p.field + ": " : "") + p.msg;
      row.addEventListener("click", function () { ta.focus(); ta.setSelectionRange(p.at, p.at); });
      status.appendChild(row);
    });
  }

  // --- completion -----------------------------------------------------
  // context scans text up to the cursor: the path of the container it is
  // in, and whether it is in a key string or a value string, with the part
  // of the string already typed.
  function context(text, at) {
    var stack = [], i = 0;
    // Each frame: {obj, key, idx, wantKey}.
    function done() { var f = stack[stack.length - 1]; if (f) { if (f.obj) f.wantKey = true; else f.idx++; } }
    while (i < at) {
      var c = text[i];
      if (c === '"') {
        var s = i + 1, j = s;
        while (j < text.length && text[j] !== '"' && text[j] !== "\n") { if (text[j] === "\\") j++; j++; }
        var top = stack[stack.length - 1];
        var isKey = top && top.obj && top.wantKey;
        if (at <= j) {
          return { inString: true, isKey: isKey, from: s, typed: text.slice(s, at), path: pathOf(stack, isKey), closed: text[j] === '"' ? j : -1 };
        }
        var str = text.slice(s, j);
        if (isKey) { top.key = str; top.wantKey = false; } else done();
        i = j + 1; continue;
      }
      if (c === "{") stack.push({ obj: true, wantKey: true, idx: 0 });
      else if (c === "[") stack.push({ obj: false, idx: 0 });
      else if (c === "}" || c === "]") { stack.pop(); done(); }
      else if (/[-0-9tfn]/.test(c)) {
        var m = /^(-?[0-9.eE+]+|true|false|null)/.exec(text.slice(i, i + 64));
        if (m) { i += m[0].length; done(); continue; }
      }
      i++;
    }
    return { inString: false, path: pathOf(stack, false) };
  }
  function pathOf(stack, isKey) {
    var out = [];
    stack.forEach(function (f, n) {
      if (!f.obj) out.push(f.idx);
      else if (!(isKey && n === stack.length - 1)) out.push(f.key);
    });
    return out;
  }
  var current = null; // {ctx, options}
  function suggest() {
    var ctx = context(ta.value, ta.selectionStart);
    var options = [];
    if (ctx.inString && root) {
      var here = schemaAt(ctx.path);
      options = ctx.isKey ? fieldsOf(here) : enumOf(here);
      options = options.filter(function (o) { return typeof o === "string" && o.toLowerCase().indexOf(ctx.typed.toLowerCase()) === 0 && o !== ctx.typed; });
    }
    box.textContent = "";
    if (!options.length || ta.selectionStart !== ta.selectionEnd) { box.hidden = true; current = null; return; }
    current = { ctx: ctx, options: options };
    var label = document.createElement("span");
    label.className = "hint";
    label.textContent = (ctx.isKey ? "Fields" : "Values") + " (Tab takes the first):";
    box.appendChild(label);
    options.slice(0, 30).forEach(function (o) {
      var b = document.createElement("button");
      b.type = "button";
      b.className = "secondary suggestion";
      b.setAttribute("role", "option");
      b.textContent = o;
      b.addEventListener("mousedown", function (e) { e.preventDefault(); accept(o); });
      box.appendChild(b);
    });
    box.hidden = false;
  }
  function accept(option) {
    if (!current) return;
    var ctx = current.ctx, text = ta.value;
    var end = ctx.closed >= 0 ? ctx.closed + 1 : ta.selectionStart;
    var insert = option + '"' + (ctx.isKey && text[end] !== ":" ? ": " : "");
    ta.value = text.slice(0, ctx.from) + insert + text.slice(end);
    var caret = ctx.from + insert.length;
    ta.setSelectionRange(caret, caret);
    changed();
  }

  // --- steps: add one from a template, edit the one under the cursor --
  var tools = document.getElementById("step-tools");
  var stepForm = document.getElementById("step-form");
  var templates = {
    HTTP: { name: "call", type: "HTTP", method: "POST", url: "https://api.example.com/", body: {} },
    SET: { name: "set", type: "SET", values: { key: "{{ trigger.body }}" } },
    FILTER: { name: "only_if", type: "FILTER", condition: "trigger.body != nil" },
    RESPOND: { name: "reply", type: "RESPOND", statusCode: 200, body: { status: "ok" } },
    CODE: { name: "code", type: "CODE", code: "return {ok: true}" },
    SWITCH: { name: "route", type: "SWITCH", cases: [{ when: "trigger.body.type == 'a'", steps: [] }], "default": [] },
    FOR_EACH: { name: "each", type: "FOR_EACH", items: "trigger.body.items", steps: [] },
    WAIT: { name: "later", type: "WAIT", duration: "10m" },
    STORE: { name: "remember", type: "STORE", set: { last: "{{ trigger.body.id }}" } },
    CALL_FLOW: { name: "subflow", type: "CALL_FLOW", flowId: "", input: { id: "{{ trigger.body.id }}" }, wait: true }
  };
  // The fields the form offers, beyond name and when.
  var formFields = {
    HTTP: ["method", "url", "connectionId"], FILTER: ["condition"], RESPOND: ["statusCode", "contentType"],
    CODE: ["code", "timeout"], WAIT: ["duration"], FOR_EACH: ["items"], SET: [], SWITCH: [], STORE: [], VERIFY_SIGNATURE: [],
    CALL_FLOW: ["flowId", "wait"]
  };
  // Fields the form offers as true or false.
  var booleanFields = { wait: true };
  // stepPathOf cuts path to the innermost step it is in: [..., "steps", 2].
  function stepPathOf(path) {
    for (var n = path.length; n >= 2; n--) {
      if (typeof path[n - 1] === "number" && ["steps", "default", "onError"].indexOf(path[n - 2]) >= 0) return path.slice(0, n);
    }
    return null;
  }
  function get(doc, path) {
    var v = doc;
    for (var i = 0; i < path.length && v != null; i++) v = v[path[i]];
    return v;
  }
  function names(doc) {
    var out = {};
    (function walk(v) {
      if (Array.isArray(v)) v.forEach(walk);
      else if (v && typeof v === "object") {
        if (typeof v.name === "string" && typeof v.type === "string") out[v.name] = true;
        Object.keys(v).forEach(function (k) { walk(v[k]); });
      }
    })(doc);
    return out;
  }
  // rewrite replaces the text by doc, formatted, with the cursor at the
  // start of the value at path.
  function rewrite(doc, path) {
    var text = JSON.stringify(doc, null, 2), at = 0;
    try {
      var node = parse(text);
      path.forEach(function (p) {
        node = typeof p === "number" ? node.items[p] : node.keys.filter(function (k) { return k.key === p; })[0].value;
      });
      at = node.start;
    } catch (e) { at = 0; }
    ta.value = text;
    ta.focus();
    ta.setSelectionRange(at, at);
    changed();
    formFor();
  }
  function addStep(type) {
    var doc;
    try { doc = JSON.parse(ta.value); } catch (e) { validate(); status.insertBefore(document.createTextNode("Fix the JSON to add a step. "), status.firstChild); return; }
    var step = JSON.parse(JSON.stringify(templates[type])), taken = names(doc), base = step.name;
    for (var n = 2; taken[step.name]; n++) step.name = base + "_" + n;
    var at = stepPathOf(context(ta.value, ta.selectionStart).path || []), list, index;
    if (at && Array.isArray(get(doc, at.slice(0, -1)))) {
      list = at.slice(0, -1); index = at[at.length - 1] + 1;
    } else {
      if (!Array.isArray(doc.steps)) doc.steps = [];
      list = ["steps"]; index = doc.steps.length;
    }
    get(doc, list).splice(index, 0, step);
    rewrite(doc, list.concat([index]));
  }
  var formPath = "";
  function formFor() {
    var ctx = context(ta.value, ta.selectionStart), at = stepPathOf(ctx.path || []), doc = null, step = null;
    try { doc = JSON.parse(ta.value); step = at && get(doc, at); } catch (e) { step = null; }
    if (!step || typeof step !== "object") { stepForm.hidden = true; formPath = ""; return; }
    var key = JSON.stringify(at) + step.type;
    if (key === formPath && !stepForm.hidden) return; // keep what is being typed there
    formPath = key;
    stepForm.textContent = "";
    var legend = document.createElement("legend");
    legend.textContent = "Step " + pathText(at) + (step.type ? " (" + step.type + ")" : "");
    stepForm.appendChild(legend);
    ["name", "when"].concat(formFields[step.type] || []).forEach(function (f) {
      var label = document.createElement("label"), id = "step-field-" + f, input;
      label.textContent = f;
      label.htmlFor = id;
      var values = enumOf(schemaAt(at.concat([f])));
      if (booleanFields[f]) values = ["true", "false"];
      if (values.length) {
        input = document.createElement("select");
        [""].concat(values).forEach(function (v) { var o = document.createElement("option"); o.value = o.textContent = v; input.appendChild(o); });
      } else if (f === "code") {
        input = document.createElement("textarea"); input.rows = 4;
      } else {
        input = document.createElement("input"); input.type = f === "statusCode" ? "number" : "text";
        if (f === "connectionId" && document.getElementById("connection-ids")) input.setAttribute("list", "connection-ids");
        if (f === "flowId" && document.getElementById("flow-ids")) input.setAttribute("list", "flow-ids");
      }
      input.id = id;
      input.value = step[f] == null ? "" : (typeof step[f] === "object" ? JSON.stringify(step[f]) : String(step[f]));
      input.addEventListener("change", function () {
        var d;
        try { d = JSON.parse(ta.value); } catch (e) { validate(); return; }
        var st = get(d, at);
        if (!st) return;
        var v = input.value;
        if (v === "") delete st[f];
        else if (f === "statusCode") st[f] = Number(v);
        else if (booleanFields[f]) st[f] = v === "true";
        else st[f] = v;
        formPath = "";
        rewrite(d, at);
      });
      stepForm.appendChild(label);
      stepForm.appendChild(input);
    });
    stepForm.hidden = false;
  }
  if (tools && stepForm) {
    var label = document.createElement("span");
    label.className = "hint";
    label.textContent = "Add a step:";
    tools.appendChild(label);
    Object.keys(templates).forEach(function (type) {
      var b = document.createElement("button");
      b.type = "button";
      b.className = "secondary";
      b.textContent = type;
      b.setAttribute("data-add-step", type);
      b.addEventListener("click", function () { addStep(type); });
      tools.appendChild(b);
    });
    tools.hidden = false;
    ta.addEventListener("click", formFor);
    ta.addEventListener("keyup", formFor);
  }

  // --- the rest: gutter, format, insert --------------------------------
  function numberLines() {
    var n = ta.value.split("\n").length, out = [];
    for (var i = 1; i <= n; i++) out.push(i);
    gutter.textContent = out.join("\n");
    gutter.scrollTop = ta.scrollTop;
  }
  var timer = 0;
  function changed() {
    numberLines();
    suggest();
    clearTimeout(timer);
    // Until the check runs, the status is the old text's: busy says so
    // (to a screen reader, and to a test that waits for the verdict).
    status.setAttribute("aria-busy", "true");
    timer = setTimeout(validate, 250);
  }
  ta.addEventListener("input", changed);
  ta.addEventListener("click", suggest);
  ta.addEventListener("keyup", function (e) { if (e.key.indexOf("Arrow") === 0) suggest(); });
  ta.addEventListener("scroll", function () { gutter.scrollTop = ta.scrollTop; });
  ta.addEventListener("blur", function () { box.hidden = true; });
  ta.addEventListener("keydown", function (e) {
    if (e.key === "Tab" && current && !box.hidden) { e.preventDefault(); accept(current.options[0]); }
    else if (e.key === "Escape") { box.hidden = true; }
  });
  format.hidden = false;
  format.addEventListener("click", function () {
    try { ta.value = JSON.stringify(JSON.parse(ta.value), null, 2); changed(); } catch (e) { validate(); }
  });
  document.addEventListener("click", function (e) {
    var b = e.target.closest && e.target.closest("[data-insert]");
    if (!b) return;
    var at = ta.selectionStart, text = ta.value, ins = b.getAttribute("data-insert");
    ta.value = text.slice(0, at) + ins + text.slice(ta.selectionEnd);
    ta.focus();
    ta.setSelectionRange(at + ins.length, at + ins.length);
    changed();
  });
  numberLines();
  fetch(ta.getAttribute("data-schema"), { credentials: "same-origin" })
    .then(function (r) { return r.ok ? r.json() : null; })
    .then(function (d) {
      // A new flow is a FlowCreate; an edit sends the fields to change.
      var name = ta.getAttribute("data-schema-root") || (d && d.root);
      if (d && d.schemas && d.schemas[name]) { schemas = d.schemas; root = { $ref: "#/components/schemas/" + name }; }
      ta.setAttribute("data-ready", "true");
      validate();
    })
    .catch(function () { ta.setAttribute("data-ready", "true"); validate(); });
})();
