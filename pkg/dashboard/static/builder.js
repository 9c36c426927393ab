// The visual editor: the flow's picture is the editor. A step (or the
// trigger) selected in the picture is edited in the panel beside it; "+"
// between steps opens the palette; each box has move and delete buttons.
// Every form is drawn from the server's table (forms.go, data-forms): a new
// step type is one entry there. The definition lives in the JSON textarea
// (the "Advanced" view), which this script keeps in step both ways, and the
// form posts it as before; without script the textarea is the editor.
(function () {
  "use strict";
  var root = document.getElementById("builder");
  var ta = document.getElementById("definition");
  if (!root || !ta) return;
  var forms = JSON.parse(root.getAttribute("data-forms"));
  var known = JSON.parse(root.getAttribute("data-expressions") || "[]");
  var flowId = root.getAttribute("data-flow-id") || "";
  var picture = document.getElementById("builder-picture");
  var panel = document.getElementById("builder-panel");
  var top = document.getElementById("builder-flow");
  var def, sel = ["trigger"], insertAt = null;
  // Outputs of step tests in this page, by step name (the field picker's
  // and the next tests' data), kept for the tab's life.
  var tested = {};
  try { tested = JSON.parse(sessionStorage.getItem("flow-tests:" + flowId) || "{}"); } catch (e) { tested = {}; }

  function el(tag, attrs, kids) {
    var e = document.createElement(tag);
    Object.keys(attrs || {}).forEach(function (k) {
      if (k === "text") e.textContent = attrs[k];
      else if (k === "class") e.className = attrs[k];
      else e.setAttribute(k, attrs[k]);
    });
    (kids || []).forEach(function (k) { if (k) e.appendChild(k); });
    return e;
  }
  function spec(type) { return forms.steps.filter(function (s) { return s.type === type; })[0]; }
  function triggerSpec(type) { return forms.triggers.filter(function (s) { return s.type === type; })[0]; }
  function at(path) { var v = def; path.forEach(function (p) { v = v == null ? v : v[p]; }); return v; }
  function getKey(obj, key) { key.split(".").forEach(function (k) { obj = obj == null ? undefined : obj[k]; }); return obj; }
  function setKey(obj, key, v) {
    var ks = key.split("."), chain = [obj];
    for (var i = 0; i < ks.length - 1; i++) {
      if (obj[ks[i]] == null || typeof obj[ks[i]] !== "object") obj[ks[i]] = {};
      obj = obj[ks[i]]; chain.push(obj);
    }
    if (v === undefined) {
      delete obj[ks[ks.length - 1]];
      // An object left empty goes too ("retry": {} is not a policy).
      for (var j = ks.length - 2; j >= 0; j--) { if (Object.keys(chain[j + 1]).length) break; delete chain[j][ks[j]]; }
    } else obj[ks[ks.length - 1]] = v;
  }

  // --- the definition <-> the textarea ---------------------------------
  function load() {
    try { def = JSON.parse(ta.value); } catch (e) { return false; }
    if (!def || typeof def !== "object") return false;
    def.trigger = def.trigger || { type: "WEBHOOK" };
    def.steps = def.steps || [];
    return true;
  }
  var writing = false;
  function save() {
    writing = true;
    ta.value = JSON.stringify(def, null, 2);
    ta.dispatchEvent(new Event("input", { bubbles: true }));
    writing = false;
    drawPicture();
  }
  ta.addEventListener("input", function () { if (!writing && load()) { drawAll(); } });

  // --- the picture -----------------------------------------------------
  function label(s) {
    var sp = spec(s.type);
    return (sp ? sp.label : s.type);
  }
  function triggerText() {
    var t = def.trigger, w = t.webhook || {};
    if (t.type === "WEBHOOK") return def.engine === "WORKFLOW_BUILDER" ? "Webhook " + (w.httpMethod || "POST") + " /" + (w.path || "") + (w.responseMode === "ON_COMPLETION" ? ", answers" : "") : "Webhook POST";
    if (t.type === "SCHEDULE") return "Schedule " + ((t.schedule || {}).cron || "");
    if (t.type === "POLL") return "Poll every " + ((t.poll || {}).every || "");
    return t.type;
  }
  function same(a, b) { return a.length === b.length && a.every(function (x, i) { return x === b[i]; }); }
  function box(path, title, sub, cls) {
    var b = el("button", { type: "button", "class": "bp-box " + (cls || "") + (same(path, sel) ? " selected" : ""), "data-path": JSON.stringify(path), title: title + " (" + sub + ")" },
      [el("span", { "class": "bp-name", text: title }), el("span", { "class": "bp-kind", text: sub })]);
    if (same(path, sel)) b.setAttribute("aria-pressed", "true");
    return b;
  }
  function plus(listPath, i) {
    var open = insertAt && same(insertAt[0], listPath) && insertAt[1] === i;
    return el("button", { type: "button", "class": "bp-add" + (open ? " open" : ""), "data-add": JSON.stringify([listPath, i]), title: "Add a step here", "aria-label": "Add a step here", text: "+" });
  }
  function list(listPath) {
    var arr = at(listPath) || [];
    var ol = el("ol", { "class": "bp-list" }, [el("li", { "class": "bp-gap" }, [plus(listPath, 0)])]);
    arr.forEach(function (s, i) {
      var path = listPath.concat([i]);
      var li = el("li", { "class": "bp-step", "data-step": s.name || "" });
      if (s.when) li.appendChild(el("div", { "class": "bp-when", text: "when " + s.when, title: "when " + s.when }));
      var row = el("div", { "class": "bp-row" }, [box(path, s.name || "(no name)", label(s), "type-" + String(s.type).toLowerCase())]);
      var tools = el("span", { "class": "bp-tools" });
      if (i > 0) tools.appendChild(el("button", { type: "button", "class": "bp-tool", "data-move": JSON.stringify([listPath, i, -1]), title: "Move up", "aria-label": "Move " + s.name + " up", text: "↑" }));
      if (i < arr.length - 1) tools.appendChild(el("button", { type: "button", "class": "bp-tool", "data-move": JSON.stringify([listPath, i, 1]), title: "Move down", "aria-label": "Move " + s.name + " down", text: "↓" }));
      tools.appendChild(el("button", { type: "button", "class": "bp-tool danger", "data-delete": JSON.stringify([listPath, i]), title: "Delete", "aria-label": "Delete " + s.name, text: "✕" }));
      row.appendChild(tools);
      li.appendChild(row);
      if (s.type === "SWITCH") {
        var cols = el("div", { "class": "bp-cases" });
        (s.cases || []).forEach(function (c, j) {
          c.steps = c.steps || [];
          cols.appendChild(el("div", { "class": "bp-case" }, [el("div", { "class": "bp-frame-label", text: "case " + (j + 1) + ": " + c.when, title: c.when }), list(path.concat(["cases", j, "steps"]))]));
        });
        if (s["default"]) cols.appendChild(el("div", { "class": "bp-case" }, [el("div", { "class": "bp-frame-label", text: "default" }), list(path.concat(["default"]))]));
        li.appendChild(cols);
      } else if (s.type === "FOR_EACH") {
        s.steps = s.steps || [];
        li.appendChild(el("div", { "class": "bp-loop" }, [el("div", { "class": "bp-frame-label", text: "for each item of " + (typeof s.items === "string" ? s.items : JSON.stringify(s.items)) }), list(path.concat(["steps"]))]));
      }
      if (s.notify || s.type === "APPROVAL" || (s.type === "WAIT" && s["for"] === "callback")) {
        // Notify steps run when the wait begins: a frame of their own, as
        // a loop's body, so they are added and edited in the picture.
        li.appendChild(el("div", { "class": "bp-loop bp-notify" }, [el("div", { "class": "bp-frame-label", text: "notify when the wait begins" }), list(path.concat(["notify"]))]));
      }
      ol.appendChild(li);
      ol.appendChild(el("li", { "class": "bp-gap" }, [plus(listPath, i + 1)]));
    });
    return ol;
  }
  function drawPicture() {
    picture.textContent = "";
    picture.appendChild(box(["trigger"], "Trigger", triggerText(), "trigger"));
    picture.appendChild(list(["steps"]));
    var err = el("div", { "class": "bp-onerror" }, [el("div", { "class": "bp-frame-label", text: "onError: once a run has failed" }), list(["onError"])]);
    if (!def.onError) def.onError = undefined;
    picture.appendChild(err);
  }

  // --- the palette ------------------------------------------------------
  function palette() {
    var wrap = el("div", { "class": "palette", id: "builder-palette", role: "menu" }, [el("h2", { text: "Add a step" })]);
    forms.groups.forEach(function (g) {
      var types = forms.steps.filter(function (s) { return s.group === g.id && !s.hidden; });
      var sec = el("div", { "class": "palette-group" }, [el("h3", { text: g.label })]);
      if (!types.length) sec.appendChild(el("p", { "class": "hint", text: "none yet" }));
      types.forEach(function (s) {
        sec.appendChild(el("button", { type: "button", "class": "secondary", "data-new-step": s.type, role: "menuitem", title: s.help || s.label, text: s.label }));
      });
      wrap.appendChild(sec);
    });
    wrap.appendChild(el("button", { type: "button", "class": "link", "data-close-palette": "1", text: "Cancel" }));
    return wrap;
  }
  function uniqueName(base) {
    var names = {};
    function walk(arr) { (arr || []).forEach(function (s) { names[s.name] = true; (s.cases || []).forEach(function (c) { walk(c.steps); }); walk(s["default"]); walk(s.steps); walk(s.notify); }); }
    walk(def.steps); walk(def.onError);
    if (!names[base]) return base;
    for (var n = 2; ; n++) if (!names[base + "_" + n]) return base + "_" + n;
  }
  function addStep(type) {
    var sp = spec(type), listPath = insertAt[0], i = insertAt[1];
    var s = { name: uniqueName(sp.name || type.toLowerCase()), type: type };
    Object.keys(sp["new"] || {}).forEach(function (k) { s[k] = JSON.parse(JSON.stringify(sp["new"][k])); });
    if (listPath[0] === "onError" && !def.onError) def.onError = [];
    var arr = at(listPath);
    if (!arr) { setKey(at(listPath.slice(0, -1)), String(listPath[listPath.length - 1]), []); arr = at(listPath); }
    arr.splice(i, 0, s);
    insertAt = null;
    sel = listPath.concat([i]);
    save();
    drawPanel();
  }

  // --- the field picker ---------------------------------------------------
  // fields lists what a step at sel may read: the trigger's fields (its
  // inputSchema, the sample), and the earlier steps' outputs (step tests,
  // the last run, each type's declared output).
  function schemaPaths(prefix, s, depth, out) {
    out.push(prefix);
    if (!s || depth > 3 || !s.properties) return;
    Object.keys(s.properties).sort().forEach(function (k) { if (/^[A-Za-z_][A-Za-z0-9_]*$/.test(k)) schemaPaths(prefix + "." + k, s.properties[k], depth + 1, out); });
  }
  function valuePaths(prefix, v, depth, out) {
    out.push(prefix);
    if (!v || typeof v !== "object" || Array.isArray(v) || depth > 3) return;
    Object.keys(v).sort().forEach(function (k) { if (/^[A-Za-z_][A-Za-z0-9_]*$/.test(k)) valuePaths(prefix + "." + k, v[k], depth + 1, out); });
  }
  function earlier() {
    var out = [], done = false;
    function walk(arr, base) {
      (arr || []).forEach(function (s, i) {
        if (done) return;
        var p = base.concat([i]);
        if (same(p, sel)) { done = true; return; }
        out.push(s);
        (s.cases || []).forEach(function (c, j) { walk(c.steps, p.concat(["cases", j, "steps"])); });
        walk(s["default"], p.concat(["default"]));
        walk(s.steps, p.concat(["steps"]));
        walk(s.notify, p.concat(["notify"]));
      });
    }
    walk(def.steps, ["steps"]);
    if (!done) walk(def.onError, ["onError"]);
    return out;
  }
  function fields() {
    var out = [];
    var schema = ((def.trigger || {}).webhook || {}).inputSchema;
    if (schema) schemaPaths("trigger.body", schema, 0, out);
    known.filter(function (k) { return k.indexOf("trigger.") === 0; }).forEach(function (k) { out.push(k); });
    if (!out.length) out.push("trigger.body");
    earlier().forEach(function (s) {
      var prefix = "steps." + s.name;
      if (tested[s.name] !== undefined) valuePaths(prefix, tested[s.name], 0, out);
      known.filter(function (k) { return k === prefix || k.indexOf(prefix + ".") === 0; }).forEach(function (k) { out.push(k); });
      out.push(prefix);
      ((spec(s.type) || {}).output || []).forEach(function (f) { out.push(prefix + "." + f); });
    });
    return out.filter(function (v, i) { return out.indexOf(v) === i; });
  }
  function picker(input, kind) {
    var btn = el("button", { type: "button", "class": "secondary picker", title: "Insert a field", "aria-label": "Insert a field", "aria-expanded": "false", text: "{…}" });
    var box = el("div", { "class": "picker-list", role: "listbox", hidden: "" });
    btn.addEventListener("click", function () {
      if (!box.hidden) { box.hidden = true; btn.setAttribute("aria-expanded", "false"); return; }
      box.textContent = "";
      fields().forEach(function (f) {
        var o = el("button", { type: "button", "class": "link", role: "option", "data-field": f }, [el("code", { text: f })]);
        o.addEventListener("click", function () {
          var ins = kind === "expression" ? f : "{{ " + f + " }}";
          var a = input.selectionStart == null ? input.value.length : input.selectionStart;
          var b = input.selectionEnd == null ? a : input.selectionEnd;
          input.value = input.value.slice(0, a) + ins + input.value.slice(b);
          input.dispatchEvent(new Event("input", { bubbles: true }));
          box.hidden = true;
          btn.setAttribute("aria-expanded", "false");
        });
        box.appendChild(o);
      });
      box.hidden = false;
      btn.setAttribute("aria-expanded", "true");
    });
    return [btn, box];
  }

  // --- the forms --------------------------------------------------------
  var nid = 0;
  function selectOf(id, opts, v) {
    var input = el("select", { id: id });
    var cur = v == null ? "" : String(v);
    if (!opts.some(function (o) { return o[0] === cur; })) opts.push([cur, cur]);
    opts.forEach(function (o) { var op = el("option", { value: o[0], text: o[1] }); if (o[0] === cur) op.selected = true; input.appendChild(op); });
    return input;
  }
  function options(listId) {
    var dl = document.getElementById(listId);
    return dl ? Array.prototype.map.call(dl.options, function (o) {
      return { id: o.value, name: o.getAttribute("data-name") || o.value, type: o.getAttribute("data-type") || "", app: o.getAttribute("data-app") || "" };
    }) : [];
  }
  function connections() { return options("connection-ids"); }
  // A WAIT's mode is read from its fields; the one just picked is kept
  // while its field is still empty.
  var picked = typeof WeakMap === "function" ? new WeakMap() : null;
  function waitMode(s) {
    if (s["for"] === "callback") return "callback";
    if (s.until != null) return "until";
    if (s.duration == null && picked && picked.get(s)) return picked.get(s);
    return "duration";
  }
  function removeButton(label, fn) {
    var b = el("button", { type: "button", "class": "bp-tool danger", "aria-label": label, text: "✕" });
    b.addEventListener("click", fn);
    return b;
  }
  // A value typed in a row: a string stays one (a template); a new row's
  // number is a number. A row first shown as JSON is read back as JSON.
  function rowValue(text, plain) {
    if (plain === true) return text;
    if (plain === false) { try { return JSON.parse(text); } catch (e) { return text; } }
    return /^-?\d+(\.\d+)?$/.test(text.trim()) ? Number(text) : text;
  }
  function valuesEditor(id, f, items, set) {
    var box = el("div", { "class": "kv values", id: id });
    var plain = items.map(function (x) { return typeof x === "string" ? true : false; });
    function draw() {
      box.textContent = "";
      items.forEach(function (x, i) {
        var inp = el("input", { type: "text", "class": "kv-value", value: typeof x === "string" ? x : JSON.stringify(x), "aria-label": f.label + " " + (i + 1), placeholder: "value or {{ expression }}" });
        inp.addEventListener("input", function () { items[i] = rowValue(inp.value, plain[i]); set(items.slice()); });
        var pk = picker(inp, "template");
        box.appendChild(el("div", { "class": "kv-row" }, [el("span", { text: "$" + (i + 1) }), inp, pk[0], removeButton("Remove value " + (i + 1), function () {
          items.splice(i, 1); plain.splice(i, 1); set(items.length ? items.slice() : undefined); draw();
        }), pk[1]]));
      });
      var add = el("button", { type: "button", "class": "secondary", text: "Add a value" });
      add.addEventListener("click", function () { items.push(""); plain.push(undefined); set(items.slice()); draw(); var vs = box.querySelectorAll(".kv-value"); vs[vs.length - 1].focus(); });
      box.appendChild(add);
    }
    draw();
    return box;
  }
  function toolsEditor(id, f, tools, set) {
    var box = el("div", { "class": "kv tools", id: id });
    var flows = options("flow-ids"), mcps = connections().filter(function (c) { return c.type === "MCP"; });
    function push() { set(tools.length ? tools : undefined); }
    function draw() {
      box.textContent = "";
      tools.forEach(function (t, i) {
        var kind = selectOf("", [["flow", "a flow"], ["mcp", "an MCP tool"]], t.mcp ? "mcp" : "flow");
        kind.setAttribute("aria-label", "Tool " + (i + 1) + ": kind");
        kind.className = "tool-kind";
        kind.addEventListener("change", function () {
          tools[i] = kind.value === "mcp" ? { mcp: { connection: "", tool: "" } } : { flow: "" };
          push(); draw();
        });
        var row = el("div", { "class": "kv-row" }, [kind]);
        if (t.mcp) {
          var c = selectOf("", [["", "(connection)"]].concat(mcps.map(function (m) { return [m.name, m.name]; })), t.mcp.connection);
          c.setAttribute("aria-label", "Tool " + (i + 1) + ": MCP connection");
          c.className = "tool-connection";
          c.addEventListener("change", function () { t.mcp.connection = c.value; push(); });
          var n = el("input", { type: "text", "class": "tool-name", value: t.mcp.tool || "", placeholder: "tool name", "aria-label": "Tool " + (i + 1) + ": tool name" });
          n.addEventListener("input", function () { t.mcp.tool = n.value; push(); });
          row.appendChild(c); row.appendChild(n);
        } else {
          var fl = selectOf("", [["", "(flow)"]].concat(flows.map(function (x) { return [x.name, x.name]; })), t.flow);
          fl.setAttribute("aria-label", "Tool " + (i + 1) + ": flow");
          fl.className = "tool-flow";
          fl.addEventListener("change", function () { t.flow = fl.value; push(); });
          row.appendChild(fl);
        }
        row.appendChild(removeButton("Remove tool " + (i + 1), function () { tools.splice(i, 1); push(); draw(); }));
        box.appendChild(row);
      });
      var add = el("button", { type: "button", "class": "secondary", text: "Add a tool" });
      add.addEventListener("click", function () { tools.push({ flow: "" }); push(); draw(); });
      box.appendChild(add);
    }
    draw();
    return box;
  }
  // The form builder writes APPROVAL's form: each row a property (name,
  // type, enum values, required). Keywords it does not edit (title,
  // description, bounds) stay as written.
  var formTypes = ["string", "number", "integer", "boolean", "enum"];
  function formBuilder(id, schema, set) {
    var box = el("div", { "class": "form-build", id: id });
    var rows = schema ? Object.keys(schema.properties || {}).map(function (n) {
      return { name: n, prop: schema.properties[n], req: (schema.required || []).indexOf(n) >= 0 };
    }) : [];
    function write() {
      var named = rows.filter(function (r) { return r.name !== ""; });
      if (!named.length && !schema) { set(undefined); return; }
      var out = schema || { type: "object" };
      var props = {};
      named.forEach(function (r) { props[r.name] = r.prop; });
      out.properties = props;
      var req = (out.required || []).filter(function (n) { return named.some(function (r) { return r.req && r.name === n; }); });
      named.forEach(function (r) { if (r.req && req.indexOf(r.name) < 0) req.push(r.name); });
      if (req.length) out.required = req; else delete out.required;
      if (!named.length) { schema = null; set(undefined); return; }
      schema = out;
      set(out);
    }
    function draw() {
      box.textContent = "";
      rows.forEach(function (r, i) {
        var n = el("input", { type: "text", "class": "fb-name", value: r.name, placeholder: "name", "aria-label": "Form field " + (i + 1) + ": name" });
        n.addEventListener("input", function () { r.name = n.value; write(); });
        var t = selectOf("", formTypes.map(function (x) { return [x, x]; }), r.prop.enum ? "enum" : (r.prop.type || "string"));
        t.className = "fb-type";
        t.setAttribute("aria-label", "Form field " + (i + 1) + ": type");
        var ev = el("input", { type: "text", "class": "fb-enum", value: (r.prop.enum || []).join(", "), placeholder: "values, comma separated", "aria-label": "Form field " + (i + 1) + ": values" });
        ev.hidden = !r.prop.enum;
        ev.addEventListener("input", function () {
          r.prop.enum = ev.value.split(",").map(function (x) { return x.trim(); }).filter(Boolean);
          write();
        });
        t.addEventListener("change", function () {
          if (t.value === "enum") { r.prop.enum = r.prop.enum || []; if (r.prop.type !== "string") delete r.prop.type; ev.hidden = false; }
          else { delete r.prop.enum; r.prop.type = t.value; ev.hidden = true; }
          write();
        });
        var rq = el("input", { type: "checkbox", "class": "fb-required" });
        rq.checked = r.req;
        rq.addEventListener("change", function () { r.req = rq.checked; write(); });
        box.appendChild(el("div", { "class": "kv-row fb-row" }, [n, t, ev, el("label", { "class": "check" }, [rq, document.createTextNode(" required")]),
          removeButton("Remove form field " + (r.name || i + 1), function () { rows.splice(i, 1); write(); draw(); })]));
      });
      var add = el("button", { type: "button", "class": "secondary", text: "Add a form field" });
      add.addEventListener("click", function () { rows.push({ name: "", prop: { type: "string" }, req: false }); draw(); var ns = box.querySelectorAll(".fb-name"); ns[ns.length - 1].focus(); });
      box.appendChild(add);
    }
    draw();
    return box;
  }
  // ACTION: an app, one of its actions, a connection of the app's kind,
  // and one input per property of the action's input schema.
  var apps = [];
  try { apps = JSON.parse(root.getAttribute("data-apps") || "[]"); } catch (e) { apps = []; }
  function appAction(id, s, onChange) {
    var box = el("div", { "class": "app-action" });
    function draw() {
      box.textContent = "";
      var appKey = String(s.action || "").split(".")[0];
      var app = apps.filter(function (a) { return a.key === appKey; })[0];
      var appSel = selectOf(id, [["", "(pick an app)"]].concat(apps.map(function (a) { return [a.key, a.name]; })), app ? appKey : (s.action ? appKey : ""));
      appSel.className = "aa-app";
      appSel.addEventListener("change", function () {
        var a = apps.filter(function (x) { return x.key === appSel.value; })[0];
        s.action = a ? a.actions[0].key : undefined;
        if (!s.action) delete s.action;
        s.input = {};
        delete s.connection; delete s.connectionId;
        onChange(); draw();
      });
      box.appendChild(appSel);
      if (!app) return;
      var act = app.actions.filter(function (x) { return x.key === s.action; })[0];
      var actId = id + "-action";
      var actSel = selectOf(actId, app.actions.map(function (x) { return [x.key, x.title]; }), s.action);
      actSel.className = "aa-action";
      actSel.addEventListener("change", function () { s.action = actSel.value; s.input = {}; onChange(); draw(); });
      box.appendChild(el("label", { "for": actId, text: "Action *" }));
      box.appendChild(actSel);
      if (act && act.description) box.appendChild(el("small", { "class": "hint", text: act.description }));
      var appKeys = {};
      apps.forEach(function (a) { appKeys[a.key] = true; });
      var cs = connections().filter(function (c) { return c.app === app.key || (c.type === app.connectionType && !appKeys[c.app]); });
      var connId = id + "-connection";
      var opts = [["", "(none)"]].concat(cs.map(function (c) { return [c.name, c.name + " (" + c.type + ")"]; }));
      var cur = s.connection || "";
      if (!cur && s.connectionId) { cur = "id:" + s.connectionId; opts.push([cur, s.connectionId]); }
      var cSel = selectOf(connId, opts, cur);
      cSel.className = "aa-connection";
      cSel.addEventListener("change", function () {
        delete s.connectionId;
        if (cSel.value === "") delete s.connection; else s.connection = cSel.value;
        onChange();
      });
      box.appendChild(el("label", { "for": connId, text: "Connection (" + app.connectionType + ")" }));
      box.appendChild(cSel);
      if (!act) return;
      var schema = act.input || {}, props = schema.properties || {}, req = schema.required || [];
      Object.keys(props).forEach(function (name) {
        box.appendChild(actionInput(id + "-in-" + name, s, name, props[name], req.indexOf(name) >= 0, onChange));
      });
    }
    draw();
    return box;
  }
  function actionInput(id, s, name, ps, required, onChange) {
    var row = el("div", { "class": "aa-input", "data-input": name });
    row.appendChild(el("label", { "for": id, text: (ps.title || name) + (required ? " *" : "") }));
    var v = (s.input || {})[name], input;
    function put(val) {
      s.input = s.input || {};
      if (val === undefined) delete s.input[name]; else s.input[name] = val;
      onChange();
    }
    var type = Array.isArray(ps.type) ? ps.type[0] : ps.type;
    if (ps["enum"]) {
      input = selectOf(id, [["", "(none)"]].concat(ps["enum"].map(function (e) { return [JSON.stringify(e), String(e)]; })), v === undefined ? "" : JSON.stringify(v));
      input.addEventListener("change", function () { put(input.value === "" ? undefined : JSON.parse(input.value)); });
    } else if (type === "boolean") {
      input = selectOf(id, [["", "default"], ["true", "yes"], ["false", "no"]], v === undefined ? "" : typeof v === "boolean" ? String(v) : v);
      input.addEventListener("change", function () { put(input.value === "" ? undefined : input.value === "true" ? true : input.value === "false" ? false : input.value); });
    } else if (type === "object" || type === "array") {
      // Nested values have no form of their own: JSON, every string a template.
      input = el("textarea", { id: id, rows: "3", spellcheck: "false" });
      input.value = v === undefined ? "" : typeof v === "string" ? v : JSON.stringify(v, null, 2);
      input.addEventListener("input", function () {
        var t = input.value;
        input.removeAttribute("aria-invalid");
        if (t.trim() === "") { put(undefined); return; }
        try { put(JSON.parse(t)); } catch (e) { if (/^\s*\{\{/.test(t)) put(t); else input.setAttribute("aria-invalid", "true"); }
      });
    } else {
      var numeric = type === "number" || type === "integer";
      input = el(ps["x-widget"] === "textarea" ? "textarea" : "input", { id: id, spellcheck: "false" });
      if (input.tagName === "INPUT") input.type = "text";
      if (numeric) input.setAttribute("inputmode", "decimal");
      input.value = v === undefined ? "" : typeof v === "string" ? v : JSON.stringify(v);
      // A number field may hold a template, checked once rendered.
      input.addEventListener("input", function () {
        var t = input.value;
        put(t === "" ? undefined : numeric && /^-?\d+(\.\d+)?$/.test(t.trim()) ? Number(t) : t);
      });
    }
    if (required) input.setAttribute("aria-required", "true");
    row.appendChild(input);
    if (!ps["enum"] && type !== "boolean") picker(input, "template").forEach(function (n) { row.appendChild(n); });
    if (ps.description) row.appendChild(el("small", { "class": "hint", text: ps.description }));
    return row;
  }
  function fieldRow(obj, f, onChange) {
    var id = "bf-" + (++nid), v = getKey(obj, f.key), input;
    var wrap = el("div", { "class": "bf-field bf-" + f.kind, "data-key": f.key });
    var lab = el("label", { "for": id, text: f.label + (f.required ? " *" : "") });
    wrap.appendChild(lab);
    function set(val) { setKey(obj, f.key, val); onChange(); }
    switch (f.kind) {
      case "select": case "bool": case "connection": case "flow":
        input = el("select", { id: id });
        var opts = f.kind === "bool" ? [["", "default"], ["true", "yes"], ["false", "no"]] : (f.options || []).map(function (o) { return [o, o || "(none)"]; });
        if (f.kind === "connection" || f.kind === "flow") {
          opts = [["", "(none)"]];
          var dl = document.getElementById(f.kind === "connection" ? "connection-ids" : "flow-ids");
          if (dl) Array.prototype.forEach.call(dl.options, function (o) { opts.push([o.value, o.label || o.value]); });
        }
        var cur = v == null ? "" : String(v);
        if (!opts.some(function (o) { return o[0] === cur; })) opts.push([cur, cur]);
        opts.forEach(function (o) { var op = el("option", { value: o[0], text: o[1] }); if (o[0] === cur) op.selected = true; input.appendChild(op); });
        input.addEventListener("change", function () {
          var x = input.value;
          set(x === "" ? undefined : f.kind === "bool" ? x === "true" : x);
        });
        break;
      case "key-value":
        input = el("div", { "class": "kv", id: id });
        var rows = Object.keys(v || {}).map(function (k) { return [k, v[k]]; });
        var drawKV = function () {
          input.textContent = "";
          rows.forEach(function (r, i) {
            var k = el("input", { type: "text", value: r[0], "aria-label": f.label + ": name", placeholder: "name", "class": "kv-key" });
            var val = el("input", { type: "text", value: typeof r[1] === "string" ? r[1] : JSON.stringify(r[1]), "aria-label": f.label + ": value " + (r[0] || ""), placeholder: "value or {{ expression }}", "class": "kv-value" });
            var plain = typeof r[1] === "string" || r[1] === undefined;
            var push = function () {
              r[0] = k.value;
              if (plain) r[1] = val.value; else { try { r[1] = JSON.parse(val.value); } catch (e) { r[1] = val.value; } }
              var o = {}; rows.forEach(function (x) { if (x[0] !== "") o[x[0]] = x[1]; });
              set(Object.keys(o).length ? o : undefined);
            };
            k.addEventListener("input", push); val.addEventListener("input", push);
            var del = el("button", { type: "button", "class": "bp-tool danger", "aria-label": "Remove " + r[0], text: "✕" });
            del.addEventListener("click", function () { rows.splice(i, 1); push(); drawKV(); });
            var pk = picker(val, "template");
            input.appendChild(el("div", { "class": "kv-row" }, [k, val, pk[0], del, pk[1]]));
          });
          var add = el("button", { type: "button", "class": "secondary", text: "Add " + (f.label.toLowerCase().indexOf("header") >= 0 ? "a header" : "a value") });
          add.addEventListener("click", function () { rows.push(["", ""]); drawKV(); var ks = input.querySelectorAll(".kv-key"); ks[ks.length - 1].focus(); });
          input.appendChild(add);
        };
        drawKV();
        break;
      case "cases":
        input = el("div", { "class": "cases", id: id });
        var drawCases = function () {
          input.textContent = "";
          (obj.cases || []).forEach(function (c, i) {
            var w = el("input", { type: "text", value: c.when || "", "aria-label": "case " + (i + 1) + " condition" });
            w.addEventListener("input", function () { c.when = w.value; onChange(); });
            var del = el("button", { type: "button", "class": "bp-tool danger", "aria-label": "Remove case " + (i + 1), text: "✕" });
            del.addEventListener("click", function () { obj.cases.splice(i, 1); onChange(); drawCases(); });
            var pk = picker(w, "expression");
            input.appendChild(el("div", { "class": "kv-row" }, [el("span", { text: "case " + (i + 1) }), w, pk[0], del, pk[1]]));
          });
          var add = el("button", { type: "button", "class": "secondary", text: "Add a case" });
          add.addEventListener("click", function () { obj.cases = obj.cases || []; obj.cases.push({ when: "", steps: [] }); onChange(); drawCases(); });
          var dflt = el("label", {}, [el("input", { type: "checkbox" }), document.createTextNode(" a default branch")]);
          dflt.firstChild.checked = !!obj["default"];
          dflt.firstChild.addEventListener("change", function () { if (dflt.firstChild.checked) obj["default"] = obj["default"] || []; else delete obj["default"]; onChange(); });
          input.appendChild(add); input.appendChild(dflt);
        };
        drawCases();
        break;
      case "steps":
        input = el("p", { "class": "hint", id: id, text: "Edited in the picture: use + inside its frame." });
        break;
      case "connection-name":
        input = selectOf(id, [["", "(none)"]].concat(connections().filter(function (c) { return (f.options || []).indexOf(c.type) >= 0; })
          .map(function (c) { return [c.name, c.name + " (" + c.type + ")"]; })), v);
        input.addEventListener("change", function () { set(input.value === "" ? undefined : input.value); });
        break;
      case "checkboxes":
        input = el("div", { "class": "checks", id: id, role: "group", "aria-label": f.label });
        (f.options || []).forEach(function (o) {
          var cb = el("input", { type: "checkbox", value: o });
          cb.checked = Array.isArray(v) && v.indexOf(o) >= 0;
          cb.addEventListener("change", function () {
            // The list keeps its order: a box checked is added at its end.
            var now = (getKey(obj, f.key) || []).filter(function (x) { return x !== o; });
            if (cb.checked) now.push(o);
            set(now.length ? now : undefined);
          });
          input.appendChild(el("label", { "class": "check" }, [cb, document.createTextNode(" " + o)]));
        });
        break;
      case "values":
        input = valuesEditor(id, f, Array.isArray(v) ? v.slice() : [], set);
        break;
      case "tools":
        input = toolsEditor(id, f, Array.isArray(v) ? v : [], set);
        break;
      case "form-schema":
        input = formBuilder(id, v && typeof v === "object" && !Array.isArray(v) ? v : null, set);
        break;
      case "app-action":
        input = appAction(id, obj, onChange);
        break;
      case "mode":
        input = selectOf(id, (f.options || []).map(function (o) { return [o, o]; }), waitMode(obj));
        input.addEventListener("change", function () {
          // Each mode has its own fields: the others' go.
          ["duration", "until", "for", "timeout", "notify"].forEach(function (k) { delete obj[k]; });
          if (input.value === "callback") obj["for"] = "callback";
          if (picked) picked.set(obj, input.value);
          onChange(); drawPicture(); drawPanel();
        });
        break;
      case "body": case "json": case "multiline": case "list":
        input = el("textarea", { id: id, rows: f.kind === "multiline" ? "6" : "3", spellcheck: "false" });
        input.value = v == null ? "" : f.kind === "list" ? v.join("\n") : (f.kind === "multiline" || (f.kind === "body" && typeof v === "string")) ? v : JSON.stringify(v, null, 2);
        input.addEventListener("input", function () {
          var t = input.value, val;
          input.removeAttribute("aria-invalid");
          if (t.trim() === "") val = undefined;
          else if (f.kind === "list") val = t.split("\n").map(function (x) { return x.trim(); }).filter(Boolean);
          else if (f.kind === "multiline") val = t;
          else if (f.kind === "json" || /^\s*[\[{]/.test(t)) {
            // A body that looks like JSON is JSON (an object of templates);
            // anything else is a template sent as text.
            try { val = JSON.parse(t); } catch (e) { if (f.kind === "json") { input.setAttribute("aria-invalid", "true"); return; } val = t; }
          } else val = t;
          set(val);
        });
        break;
      default:
        var numeric = f.kind === "number" || f.kind === "decimal";
        input = el("input", { id: id, type: numeric ? "number" : "text", value: v == null ? "" : String(v), spellcheck: "false" });
        if (f.kind === "decimal") input.setAttribute("step", "any");
        input.addEventListener("input", function () {
          var x = input.value;
          set(x === "" ? undefined : numeric ? Number(x) : x);
        });
    }
    wrap.appendChild(input);
    if (f.kind === "template" || f.kind === "expression" || f.kind === "body") picker(input, f.kind).forEach(function (n) { wrap.appendChild(n); });
    if (f.help) wrap.appendChild(el("small", { "class": "hint", text: f.help }));
    return wrap;
  }
  function drawFlow() {
    top.textContent = "";
    [{ key: "name", label: "Flow name", kind: "text" }, { key: "engine", label: "Engine", kind: "select", options: forms.engines, help: "WORKFLOW_BUILDER webhooks have a path and may answer with the run's result." },
     { key: "description", label: "Description", kind: "text" }].forEach(function (f) {
      top.appendChild(fieldRow(def, f, function () { save(); if (f.key === "engine") drawPanel(); }));
    });
  }
  function drawPanel() {
    panel.textContent = "";
    if (insertAt) { panel.appendChild(palette()); return; }
    if (same(sel, ["trigger"])) {
      panel.appendChild(el("h2", { text: "Trigger" }));
      var t = def.trigger;
      var typeSel = fieldRow(t, { key: "type", label: "What starts it", kind: "select", options: forms.triggers.map(function (x) { return x.type; }) }, function () {
        var ts = triggerSpec(t.type);
        ["webhook", "schedule", "poll"].forEach(function (k) { delete t[k]; });
        Object.keys((ts && ts["new"]) || {}).forEach(function (k) { if (k !== "webhook" || def.engine === "WORKFLOW_BUILDER") t[k] = JSON.parse(JSON.stringify(ts["new"][k])); });
        save(); drawPanel();
      });
      panel.appendChild(typeSel);
      var ts = triggerSpec(t.type);
      if (ts && ts.help) panel.appendChild(el("p", { "class": "hint", text: ts.help }));
      ((ts && ts.fields) || []).forEach(function (f) {
        if (f.engine && f.engine !== def.engine) return;
        panel.appendChild(fieldRow(t, f, save));
      });
      return;
    }
    var s = at(sel);
    if (!s) { sel = ["trigger"]; drawPanel(); return; }
    var sp = spec(s.type) || { label: s.type, fields: [] };
    panel.appendChild(el("h2", { text: sp.label + ": " + s.name }));
    if (sp.help) panel.appendChild(el("p", { "class": "hint", text: sp.help }));
    forms.common.concat(sp.fields).forEach(function (f) {
      if (f.mode && f.mode !== waitMode(s)) return;
      panel.appendChild(fieldRow(s, f, function () { save(); }));
    });
    var acts = el("div", { "class": "actions" });
    if (sp.testable) {
      var tb = el("button", { type: "button", "class": "secondary", id: "builder-test-step", text: "Test step" });
      tb.addEventListener("click", function () { testStep(s); });
      acts.appendChild(tb);
    }
    var del = el("button", { type: "button", "class": "secondary danger", text: "Delete step" });
    del.addEventListener("click", function () { remove(sel.slice(0, -1), sel[sel.length - 1]); });
    acts.appendChild(del);
    panel.appendChild(acts);
    panel.appendChild(el("div", { "class": "step-test-result", id: "step-test-result", "aria-live": "polite" }));
    if (tested[s.name] !== undefined) showResult({ status: "SUCCEEDED", output: tested[s.name], data: "an earlier test" });
  }
  function showResult(r) {
    var out = document.getElementById("step-test-result");
    if (!out) return;
    out.textContent = "";
    out.appendChild(el("p", { "class": "status " + String(r.status || "failed").toLowerCase(), "data-status": r.status || "", text: (r.status || "Not run") + (r.data ? " · with " + r.data : "") }));
    if (r.error || r.message) out.appendChild(el("p", { "class": "error", text: r.error || r.message }));
    if (r.output !== undefined) out.appendChild(el("pre", { text: JSON.stringify(r.output, null, 2) }));
  }
  function testStep(s) {
    var body = new URLSearchParams();
    body.set("csrf", root.getAttribute("data-csrf"));
    body.set("flowId", flowId);
    body.set("engine", def.engine || "");
    body.set("step", JSON.stringify(s));
    body.set("outputs", JSON.stringify(tested));
    showResult({ status: "", data: "", message: "Running…" });
    fetch(root.getAttribute("data-step-test"), { method: "POST", credentials: "same-origin", body: body })
      .then(function (r) { return r.json(); })
      .then(function (r) {
        if (r.status === "SUCCEEDED") {
          tested[s.name] = r.output;
          try { sessionStorage.setItem("flow-tests:" + flowId, JSON.stringify(tested)); } catch (e) { /* a full storage only loses the hint */ }
        }
        showResult(r);
      })
      .catch(function (e) { showResult({ status: "FAILED", message: String(e) }); });
  }
  function remove(listPath, i) {
    at(listPath).splice(i, 1);
    if (listPath[0] === "onError" && !def.onError.length) delete def.onError;
    sel = ["trigger"];
    save(); drawPanel();
  }
  function drawAll() { drawFlow(); drawPicture(); drawPanel(); }

  picture.addEventListener("click", function (e) {
    var t = e.target.closest("button");
    if (!t) return;
    if (t.hasAttribute("data-path")) { sel = JSON.parse(t.getAttribute("data-path")); insertAt = null; drawPicture(); drawPanel(); }
    else if (t.hasAttribute("data-add")) { insertAt = JSON.parse(t.getAttribute("data-add")); drawPicture(); drawPanel(); var first = panel.querySelector("[data-new-step]"); if (first) first.focus(); }
    else if (t.hasAttribute("data-delete")) { var d = JSON.parse(t.getAttribute("data-delete")); remove(d[0], d[1]); }
    else if (t.hasAttribute("data-move")) {
      var m = JSON.parse(t.getAttribute("data-move")), arr = at(m[0]), s = arr.splice(m[1], 1)[0];
      arr.splice(m[1] + m[2], 0, s);
      sel = m[0].concat([m[1] + m[2]]);
      save(); drawPanel();
    }
  });
  panel.addEventListener("click", function (e) {
    var t = e.target.closest("button");
    if (!t) return;
    if (t.hasAttribute("data-new-step")) addStep(t.getAttribute("data-new-step"));
    else if (t.hasAttribute("data-close-palette")) { insertAt = null; drawPicture(); drawPanel(); }
  });

  if (!load()) return; // a definition that is not JSON: the JSON view only
  root.hidden = false;
  // The JSON view stays open for a user who last used it (and shows the
  // server's message when a save was refused); else the picture is enough.
  var adv = document.getElementById("advanced");
  var pref = "";
  try { pref = localStorage.getItem("flow-editor-json") || ""; } catch (e) { pref = ""; }
  if (adv && pref !== "open" && !document.getElementById("definition-error")) adv.open = false;
  if (adv) adv.addEventListener("toggle", function () {
    try { localStorage.setItem("flow-editor-json", adv.open ? "open" : "closed"); } catch (e) { /* no storage: no memory */ }
  });
  drawAll();
  root.setAttribute("data-ready", "true");
})();
