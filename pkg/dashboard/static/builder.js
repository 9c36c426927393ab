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
      var types = forms.steps.filter(function (s) { return s.group === g.id; });
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
    function walk(arr) { (arr || []).forEach(function (s) { names[s.name] = true; (s.cases || []).forEach(function (c) { walk(c.steps); }); walk(s["default"]); walk(s.steps); }); }
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
  function fieldRow(obj, f, onChange) {
    var id = "bf-" + (++nid), v = getKey(obj, f.key), input;
    var wrap = el("div", { "class": "bf-field bf-" + f.kind, "data-key": f.key });
    var lab = el("label", { "for": id, text: f.label });
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
        input = el("p", { "class": "hint", id: id, text: "Edited in the picture: use + inside the frame." });
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
        input = el("input", { id: id, type: f.kind === "number" ? "number" : "text", value: v == null ? "" : String(v), spellcheck: "false" });
        input.addEventListener("input", function () {
          var x = input.value;
          set(x === "" ? undefined : f.kind === "number" ? Number(x) : x);
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
