// capflow's web console: plain DOM, no framework. Every value shown comes
// from the JSON API and is set as text, never as markup.
"use strict";
const capflow = (() => {
  const el = (tag, attrs = {}, ...kids) => {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs)) {
      if (k === "on") for (const [ev, f] of Object.entries(v)) e.addEventListener(ev, f);
      else if (v !== undefined && v !== null) e.setAttribute(k, v);
    }
    for (const k of kids.flat()) if (k !== null && k !== undefined) e.append(k instanceof Node ? k : String(k));
    return e;
  };
  const $ = (id) => document.getElementById(id);
  const api = async (path, opts = {}) => {
    const r = await fetch(path, { credentials: "same-origin", ...opts });
    const body = r.headers.get("Content-Type")?.includes("json") ? await r.json() : await r.text();
    if (!r.ok) {
      const e = new Error(body && body.message ? body.message : `${r.status} ${r.statusText}`);
      e.status = r.status; e.code = body && body.code;
      throw e;
    }
    banner(null);
    return body;
  };
  // The banner says Temporal does not answer (the API's 502), what the
  // console tried, and goes once an answer comes.
  const banner = (e) => {
    const b = $("banner");
    if (!b) return;
    b.hidden = !e;
    if (e) b.replaceChildren(el("strong", {}, "Temporal is unreachable. "), e.message, el("span", { class: "muted" }, ` (since ${new Date().toLocaleTimeString()})`));
  };
  const down = (e) => e && e.status === 502;
  // Control requests carry the console's CSRF token (a cookie of its own pages; docs/console.md).
  const csrf = () => (document.cookie.match(/(?:^|;\s*)capflow_csrf=([^;]*)/) || [])[1] || "";
  const post = (path, body) => api(path, { method: "POST", headers: { "Content-Type": "application/json", "X-Capflow-Csrf": csrf() }, body: JSON.stringify(body || {}) });
  // A state's mark beside a node's id, so states read without colour too.
  const icons = { succeeded: "✓", failed: "✗", running: "running…", waiting: "waiting", skipped: "skipped", cancelled: "cancelled", blocked: "blocked" };
  const badge = (s) => el("span", { class: "badge " + s }, s);
  const when = (t) => (t ? new Date(t).toLocaleString() : "");
  const dur = (ms) => (ms >= 60000 ? `${Math.floor(ms / 60000)}m ${Math.round((ms % 60000) / 1000)}s` : ms >= 1000 ? `${(ms / 1000).toFixed(1)}s` : ms > 0 ? `${ms}ms` : "");
  const notice = (text, error) => { const n = $("notice") || $("error"); if (n) n.replaceChildren(el("span", { class: error ? "notice error" : "notice" }, text)); };

  // ---- runs ----
  function runsPage() {
    const load = async () => {
      const q = new URLSearchParams();
      if ($("status").value) q.set("status", $("status").value);
      if ($("plan").value.trim()) q.set("plan", $("plan").value.trim());
      try {
        const runs = await api("/api/runs?" + q);
        $("count").textContent = `${runs.length} run(s), live`;
        $("runs").tBodies[0].replaceChildren(...runs.map((r) => {
          const end = r.ended_at ? new Date(r.ended_at) : new Date();
          const status = r.status && (r.execution === "completed" || r.execution === "running") ? r.status : r.execution;
          return el("tr", {}, el("td", {}, el("a", { href: "/runs/" + encodeURIComponent(r.workflow_id) }, r.workflow_id)),
            el("td", {}, r.plan), el("td", {}, badge(status)), el("td", {}, when(r.started_at)),
            el("td", {}, dur(end - new Date(r.started_at))), el("td", {}, r.schedule || ""));
        }));
        $("error").replaceChildren();
      } catch (e) {
        if (down(e)) { banner(e); $("count").textContent = "not live: Temporal does not answer"; return; }
        $("error").replaceChildren(el("p", { class: "notice error" }, e.message));
      }
    };
    $("status").addEventListener("change", load);
    $("plan").addEventListener("input", load);
    load();
    setInterval(load, 2000);
  }

  // ---- the graph panel ----
  // viewer shows a laid-out SVG fitted to its panel: the wheel or + and -
  // zoom (at the pointer), dragging or the arrow keys pan, 0 or "Fit"
  // fits it again. A click that ended a drag is not a click on a node.
  function viewer(box) {
    let svg = null, full = null, fitted = null, view = null, drag = null, moved = false, stale = false;
    // Too far out to read, names are not drawn (the browser would draw
    // them at its smallest font size, over each other): boxes and colours.
    const apply = () => { svg.setAttribute("viewBox", `${view.x} ${view.y} ${view.w} ${view.h}`); svg.classList.toggle("far", scale() < 0.3); };
    const aspect = () => { const r = box.getBoundingClientRect(); return r.width / Math.max(1, r.height); };
    const scale = () => box.getBoundingClientRect().width / view.w;
    // The whole graph, centred, in the panel's proportions.
    const fit = () => {
      if (!svg) return;
      stale = !box.getBoundingClientRect().width; // hidden: fitted when shown
      if (stale) return;
      const a = aspect();
      // A small graph is not blown up past 1.25 times its size.
      const w = Math.max(full.w, full.h * a, box.getBoundingClientRect().width / 1.25), h = w / a;
      fitted = view = { x: full.x - (w - full.w) / 2, y: full.y - (h - full.h) / 2, w, h };
      apply();
    };
    const toSVG = (cx, cy) => { const p = svg.createSVGPoint(); p.x = cx; p.y = cy; return p.matrixTransform(svg.getScreenCTM().inverse()); };
    const zoom = (f, at) => {
      if (!svg) return;
      const c = at || { x: view.x + view.w / 2, y: view.y + view.h / 2 };
      const w = Math.min(fitted.w * 2, Math.max(60, view.w / f)), k = w / view.w;
      view = { x: c.x - (c.x - view.x) * k, y: c.y - (c.y - view.y) * k, w, h: view.h * k };
      apply();
    };
    const pan = (dx, dy) => { view = { ...view, x: view.x + dx, y: view.y + dy }; apply(); };
    // show brings a node to the middle, large enough to read.
    const show = (node) => {
      if (!svg || !node || stale || !svg.getScreenCTM()) return;
      const r = node.getBoundingClientRect(), a = toSVG(r.left, r.top), b = toSVG(r.right, r.bottom);
      const w = Math.min(fitted.w, Math.max(view.w > 700 ? 700 : view.w, (b.x - a.x) * 4)), h = w / aspect();
      view = { x: (a.x + b.x) / 2 - w / 2, y: (a.y + b.y) / 2 - h / 2, w, h };
      apply();
    };
    const set = (markup) => {
      box.innerHTML = markup.slice(markup.indexOf("<svg")); // laid out by Graphviz
      box.querySelectorAll("title").forEach((t) => t.remove());
      svg = box.querySelector("svg");
      const vb = svg.viewBox.baseVal, pad = 8;
      full = { x: vb.x - pad, y: vb.y - pad, w: vb.width + 2 * pad, h: vb.height + 2 * pad };
      svg.removeAttribute("width"); svg.removeAttribute("height");
      fit();
    };
    box.tabIndex = 0;
    // Zoom by how far the wheel turned (a trackpad sends many small
    // events); a sideways scroll is not a zoom.
    box.addEventListener("wheel", (e) => {
      if (!svg || !e.deltaY || stale) return;
      e.preventDefault();
      const d = e.deltaMode === 1 ? e.deltaY * 40 : e.deltaY;
      zoom(Math.min(2, Math.max(0.5, Math.exp(-d * 0.002))), toSVG(e.clientX, e.clientY));
    }, { passive: false });
    box.addEventListener("pointerdown", (e) => { if (svg && e.button === 0) { drag = { x: e.clientX, y: e.clientY, v: { ...view } }; moved = false; } });
    window.addEventListener("pointermove", (e) => {
      if (!drag) return;
      if (!e.buttons) { drag = null; return; } // released outside the window
      const dx = e.clientX - drag.x, dy = e.clientY - drag.y;
      if (Math.abs(dx) + Math.abs(dy) > 4) moved = true;
      if (moved) { view = { ...drag.v, x: drag.v.x - dx / scale(), y: drag.v.y - dy / scale() }; apply(); }
    });
    window.addEventListener("pointerup", () => { drag = null; });
    window.addEventListener("pointercancel", () => { drag = null; });
    box.addEventListener("click", (e) => { if (moved) { e.stopPropagation(); moved = false; } }, true);
    box.addEventListener("keydown", (e) => {
      if (!svg || e.target !== box || e.ctrlKey || e.metaKey || e.altKey) return; // the browser's own zoom stays its
      const step = { ArrowLeft: [-0.1, 0], ArrowRight: [0.1, 0], ArrowUp: [0, -0.1], ArrowDown: [0, 0.1] }[e.key];
      if (step) pan(step[0] * view.w, step[1] * view.h);
      else if (e.key === "+" || e.key === "=") zoom(1.25);
      else if (e.key === "-") zoom(0.8);
      else if (e.key === "0") fit();
      else return;
      e.preventDefault();
    });
    window.addEventListener("resize", () => { if (svg) fit(); });
    for (const [id, f] of [["zoom-in", () => zoom(1.25)], ["zoom-out", () => zoom(0.8)], ["zoom-fit", fit]]) if ($(id)) $(id).onclick = f;
    // refit fits a graph laid out while its panel was hidden.
    const refit = () => { if (stale) fit(); };
    return { set, fit, refit, zoom, show, view: () => view && { ...view }, fitted: () => fitted && { ...fitted } };
  }

  // ---- a run ----
  function runPage(id) {
    document.title = "capflow · " + id;
    $("title").textContent = id;
    // lines: where each running step's attempt is, in words (the server's).
    let run = null, selected = null, tails = {}, lines = {}, reportLoaded = false;
    // shown: what the step panel shows now (redrawn only when it changes,
    // so what a person types there survives live updates); drafts: what
    // was typed into a wait's answer box, by wait.
    let shown = "";
    const drafts = {};
    // The plan's step ids in order, each step's state now (the states
    // query: complete even when a large run's progress leaves steps out),
    // and the groups a large plan is drawn with.
    let ids = [], states = new Map(), groups = {}, groupOf = {};
    // opened: the groups a person opened; seen: every group's members.
    const opened = new Set(), seen = {};
    const view = viewer($("graph"));
    const report = el("div", { class: "report", id: "report" });
    // The timeline tab: each started step's bar from its start to its end
    // (a running one's to now), its failed attempts marked on it, its
    // state and time in words.
    let tab = "graph", shownTimeline = "";
    const setTab = (t) => {
      tab = t;
      $("graph").hidden = t !== "graph"; $("timeline").hidden = t !== "timeline";
      $("tab-graph").setAttribute("aria-selected", t === "graph"); $("tab-timeline").setAttribute("aria-selected", t === "timeline");
      document.querySelector(".zoom").hidden = t !== "graph";
      if (t === "graph") view.refit();
      if (t === "timeline") { shownTimeline = ""; timeline(); }
    };
    $("tab-graph").onclick = () => setTab("graph");
    $("tab-timeline").onclick = () => setTab("timeline");
    const maxRows = 400;
    const timeline = async () => {
      let tl;
      try { tl = await api(base + "/timeline"); } catch (e) { $("timeline").replaceChildren(el("p", { class: "notice error" }, e.message)); return; }
      // Drawn again only when a step moved (a running one's bar grows):
      // what has the keyboard's focus keeps it otherwise.
      const sig = JSON.stringify(tl.steps);
      if (sig === shownTimeline && !tl.steps.some((s) => s.status === "running" || s.status === "waiting")) return;
      shownTimeline = sig;
      const t = (x) => new Date(x).getTime(), now = t(tl.now);
      // Each time parsed once (thousands of rows are sorted by them).
      const rows = tl.steps.filter((s) => s.started_at).map((s) => ({ ...s, from: t(s.started_at), to: s.ended_at ? t(s.ended_at) : now })).sort((a, b) => a.from - b.from);
      if (!rows.length) { $("timeline").replaceChildren(el("p", { class: "muted" }, "no step has started yet")); return; }
      const t0 = rows[0].from, end = (s) => s.to;
      const span = Math.max(1, rows.reduce((m, s) => Math.max(m, s.to), 0) - t0);
      const place = (node, from, to) => { node.style.left = ((from - t0) / span) * 100 + "%"; node.style.width = (Math.max(0, to - from) / span) * 100 + "%"; return node; };
      const kids = [el("div", { class: "tl-axis" }, el("span", {}, when(rows[0].started_at)), el("span", {}, "+" + dur(span)))];
      for (const s of rows.slice(0, maxRows)) {
        const took = dur(end(s) - s.from) || "0ms";
        const bar = place(el("span", { class: "tl-bar " + s.status, title: `${s.id}: ${s.status}, ${took}` }), s.from, end(s));
        const tries = (s.failed_attempts || []).map((a) => place(el("span", { class: "tl-attempt", title: `attempt ${a.attempt} failed (${a.code})` }), t(a.started), t(a.ended)));
        kids.push(el("div", { class: "tl-row" + (s.id === selected ? " selected" : ""), "data-step": s.id, "data-attempts": tries.length },
          el("button", { title: s.id, on: { click: () => {
            selected = s.id; paint(); showStep(); controls();
            document.querySelectorAll("#timeline .tl-row").forEach((r) => r.classList.toggle("selected", r.dataset.step === s.id));
          } } }, s.id),
          el("div", { class: "tl-track" }, bar, ...tries),
          el("span", { class: "tl-what" }, `${s.status} · ${took}` + (s.attempts > 1 ? ` · ${s.attempts} attempts` : ""))));
      }
      if (rows.length > maxRows) kids.push(el("p", { class: "muted" }, `the first ${maxRows} of ${rows.length} started steps; the report has them all`));
      if (tl.steps.length > rows.length) kids.push(el("p", { class: "muted" }, `${tl.steps.length - rows.length} step(s) not started`));
      const focused = document.activeElement && document.activeElement.closest && document.activeElement.closest("#timeline .tl-row");
      $("timeline").replaceChildren(...kids);
      if (focused) { const b = $("timeline").querySelector(`.tl-row[data-step="${CSS.escape(focused.dataset.step)}"] button`); if (b) b.focus(); }
    };
    const base = "/api/runs/" + encodeURIComponent(id);
    const act = async (action, body) => {
      try {
        const a = await post(base + "/" + action, body);
        if (a.workflow_id) { location.href = "/runs/" + encodeURIComponent(a.workflow_id); return; }
        notice(a.message || action + " sent");
        refresh();
      } catch (e) { notice(e.message, true); }
    };
    // A run Temporal does not have: said once, nothing to press, nothing
    // polled.
    let gone = false;
    const notFound = (e) => {
      gone = true;
      document.title = "capflow · no run " + id;
      $("status").className = "badge failed"; $("status").textContent = "not found";
      $("message").textContent = "";
      for (const b of ["pause", "resume", "cancel", "rerun", "rerun-from"]) $(b).disabled = true;
      $("graph").replaceChildren(el("div", { class: "notice error", id: "not-found" }, el("strong", {}, "404: no such run. "), e.message, " ", el("a", { href: "/" }, "All runs")));
      $("step").hidden = true;
    };
    $("pause").onclick = () => act("pause");
    $("resume").onclick = () => act("resume");
    $("cancel").onclick = () => confirm("Cancel the run? Its tools are stopped.") && act("cancel");
    $("rerun").onclick = () => act("rerun", {});
    $("rerun-from").onclick = () => (selected ? act("rerun", { from: selected }) : notice("select a step first", true));
    // The controls that apply to the run as it is now; the others disabled.
    const controls = () => {
      if (gone) return;
      const open = !run || ["resolving", "running", "paused"].includes(run.status);
      $("pause").disabled = !run || !open || run.status === "paused";
      $("resume").disabled = !run || run.status !== "paused";
      $("cancel").disabled = !run || !open;
      $("rerun").disabled = open;
      $("rerun-from").disabled = open || !selected;
    };
    // A running run whose steps wait for a person says so, and for what.
    const headline = () => {
      const waits = run.steps.filter((s) => s.status === "waiting" && s.waiting);
      let status = run.status, message = run.message || "";
      if (run.status === "running" && waits.length) {
        const w = waits[0];
        status = "waiting";
        message = `${w.id} waits for ${w.waiting.kind}: ${w.waiting.prompt || ""}` + (waits.length > 1 ? ` (and ${waits.length - 1} more)` : "");
      }
      $("status").className = "badge " + status; $("status").textContent = status;
      $("message").textContent = message;
    };
    // What to do next about a run that did not pass, above the graph: the
    // same answer as the CLI's, the report's and the result's "next".
    const whatNext = () => {
      const next = run.next || [];
      $("what-next").hidden = !next.length;
      $("what-next").replaceChildren(el("strong", {}, "What next"), el("ul", {}, next.map((n) => el("li", {},
        (n.step ? `${n.step} ` : "") + (n.code ? `(${n.code}${n.severity ? ", " + n.severity : ""}): ` : ""),
        n.command ? el("code", {}, n.command) : "", n.command && n.advice ? "; " : "", n.advice || "",
        ...(n.stderr_tail && n.stderr_tail.length ? [el("pre", {}, n.stderr_tail.join("\n"))] : [])))));
    };
    $("search").addEventListener("input", () => {
      const q = $("search").value.trim();
      document.querySelectorAll("#graph g.node").forEach((g) => g.classList.remove("found"));
      if (!q) return;
      const id = ids.find((x) => x.includes(q)) || q;
      const hit = document.getElementById("step-" + (groupOf[id] || id)) || [...document.querySelectorAll("#graph g.node")].find((g) => g.id.slice(5).includes(q));
      if (hit) { hit.classList.add("found"); view.show(hit); }
    });
    // Enter opens the step found (the keyboard's way to a step's panel).
    $("search").addEventListener("keydown", (e) => {
      const q = $("search").value.trim();
      const id = q && (ids.find((x) => x === q) || ids.find((x) => x.includes(q)));
      if (e.key !== "Enter" || !id) return;
      selected = id; paint(); showStep(); controls();
    });
    // A group opens in place on a click (drawn again with its steps); the
    // step panel lists its members, and can close it again.
    // The latest call wins (a click may open a group while the graph
    // before it loads); one retry waits at a time.
    let drawing = 0, retry = null;
    const again = (ms) => { clearTimeout(retry); retry = setTimeout(graph, ms); };
    const graph = async () => {
      const mine = ++drawing;
      try {
        const q = opened.size ? "?expand=" + encodeURIComponent([...opened].join(",")) : "";
        const [svg, g, gr] = await Promise.all([api(base + "/graph.svg" + q), ids.length ? null : api(base + "/graph"), api(base + "/groups" + q)]);
        if (mine !== drawing) return;
        if (g) ids = g.steps.map((s) => s.id);
        if (!ids.length) { // not resolved yet: its graph comes with its plan
          const ended = run && !["resolving", "running", "paused"].includes(run.status);
          $("graph").replaceChildren(el("p", { class: "muted" }, ended ? "the run ended before its plan was resolved: no graph" : "resolving the plan…"));
          if (!ended) again(1000);
          return;
        }
        groups = gr.groups || {};
        groupOf = {};
        for (const [gid, members] of Object.entries(groups)) for (const m of members) groupOf[m] = gid;
        view.set(svg);
        $("graph").querySelectorAll("g.node").forEach((g) => g.addEventListener("click", () => {
          selected = g.id.slice(5);
          if (groups[selected]) { seen[selected] = groups[selected]; opened.add(selected); graph(); } else paint();
          showStep(); controls();
        }));
        await loadStates(); // the states of a run that ended before the graph came
        paint();
      } catch (e) {
        if (mine !== drawing || gone) return;
        if (e.status === 404) { notFound(e); return; }
        $("graph").replaceChildren(el("p", { class: "notice error" }, e.message)); again(down(e) ? 5000 : 2000);
      }
    };
    // A group's state is its most urgent member's.
    const urgency = ["failed", "waiting", "running", "blocked", "pending", "cancelled", "skipped", "succeeded"];
    const loadStates = async () => {
      // A run that passed: every step it left out of its result succeeded.
      if (run && run.status === "passed") { states = new Map(); return; }
      if (!ids.length) return;
      const st = await api(base + "/states").catch(() => null);
      if (st) states = new Map(ids.map((id, i) => [id, st[i]]));
    };
    // A step's state: the states query's, its progress's, or (a run that
    // passed leaves steps out) succeeded.
    const stateOf = (id, steps) => states.get(id) || ((steps && steps.get(id)) || (run && run.steps.find((s) => s.id === id)) || {}).status || (run && run.status === "passed" ? "succeeded" : "pending");
    const paint = () => {
      if (!run) return;
      const steps = new Map(run.steps.map((s) => [s.id, s]));
      document.querySelectorAll("#graph g.node").forEach((g) => {
        const id = g.id.slice(5);
        if (groups[id]) {
          const n = {};
          for (const m of groups[id]) { const st = stateOf(m, steps); n[st] = (n[st] || 0) + 1; }
          const state = urgency.find((u) => n[u]) || "pending";
          g.setAttribute("class", `node step group state-${state}${id === selected ? " selected" : ""}`);
          g.dataset.state = state;
          mark(g, `✓${n.succeeded || 0} ✗${n.failed || 0} of ${groups[id].length}`);
          return;
        }
        const s = steps.get(id);
        const state = stateOf(id, steps);
        g.setAttribute("class", `node step state-${state}${id === selected ? " selected" : ""}`);
        g.dataset.state = state;
        // The mark follows the state drawn, which may be fresher (the
        // states query) than the step's progress, or stand for a step a
        // passed run left out of its result.
        mark(g, s && s.item_counts ? `✓${s.item_counts.succeeded} ✗${s.item_counts.failed} of ${s.item_counts.count}` : s && s.cached_from ? "✓ cached" : icons[state] || "");
      });
    };
    // A node's last line is kept blank for its mark (layout.go): the mark
    // sits where the layout made room for it, never over a name.
    const mark = (g, text) => {
      const lines = g.querySelectorAll("text");
      const t = lines[lines.length - 1];
      if (!t) return;
      t.classList.add("mark");
      t.textContent = text || "\u2007";
    };
    const refresh = async () => {
      let wait = 1000;
      try {
        run = await api(base);
        run.steps = run.steps || []; // a run that does not answer: only what the server knows
        await loadStates();
        headline();
        tails = {}; lines = {};
        if (run.steps.some((s) => s.status === "running")) {
          const info = await api(base + "/describe").catch(() => null);
          for (const p of (info && info.pending) || []) if (p.heartbeat && p.heartbeat.lines && p.step) tails[p.step] = p.heartbeat.lines;
          lines = (info && info.lines) || {};
        }
        paint(); summary(); controls(); whatNext(); if (selected) showStep();
        if (tab === "timeline") timeline();
      } catch (e) {
        if (e.status === 404) { notFound(e); return; }
        if (down(e)) {
          // Nothing can be sent while Temporal is away: the buttons wait.
          banner(e); wait = 5000;
          for (const b of ["pause", "resume", "cancel", "rerun", "rerun-from"]) $(b).disabled = true;
        } else notice(e.message, true);
      }
      if (!gone && (!run || ["resolving", "running", "paused"].includes(run.status) || wait > 1000)) setTimeout(refresh, wait);
    };
    const summary = () => {
      const parts = [];
      if (run.gaps && run.gaps.length) parts.push(el("h2", {}, "Gaps"), el("ul", { class: "problems" }, run.gaps.map((g) => el("li", {}, `${g.step_id}: ${g.missing_capability} (${g.reason})`))));
      if (run.warnings && run.warnings.length) parts.push(el("h2", {}, "Warnings"), el("ul", {}, run.warnings.map((w) => el("li", {}, w))));
      if (run.outputs && Object.keys(run.outputs).length) parts.push(el("h2", {}, "Outputs"), el("pre", {}, JSON.stringify(run.outputs, null, 2)));
      if (run.report && run.report.markdown) parts.push(el("h2", {}, "Report"), report);
      $("summary").replaceChildren(...parts);
      if (run.report && run.report.markdown && !reportLoaded && !["resolving", "running", "paused"].includes(run.status)) {
        reportLoaded = true;
        // Rendered by the console from report.md (its raw HTML escaped).
        api(base + "/report").then((r) => { report.innerHTML = r.html; }).catch((e) => { report.replaceChildren(el("p", { class: "muted" }, e.message)); });
      }
    };
    const showStep = () => {
      const box = $("step");
      if (groups[selected] || seen[selected]) { showGroup(box, selected); return; }
      const s = run && run.steps.find((x) => x.id === selected);
      const now = selected + JSON.stringify(s || null) + (s && tails[s.id] ? tails[s.id].join("\n") : "") + (s && lines[s.id] || "");
      if (now === shown && box.childElementCount) return; // unchanged: keep it, and what is typed there
      shown = now;
      if (!s) { box.replaceChildren(el("h2", {}, selected || "Steps"), el("p", { class: "muted" }, "not started")); return; }
      const env = s.envelope || {};
      // The failure once: its code, severity and message (not again as
      // the reason or the envelope's message), then what to do next.
      const failure = env.error ? `${env.error.code}${env.error.severity ? " (" + env.error.severity + ")" : ""}: ${env.message || s.reason || ""}` : "";
      const next = (run.next || []).find((n) => n.step === s.id);
      const rows = [["capability", s.capability], ["tool", s.tool ? `${s.tool}@${s.version}` : ""], ["status", badge(s.status)], ["attempts", s.attempts],
        ["attempt now", lines[s.id] || ""],
        ["now", s.latest ? `${s.latest.phase}: ${s.latest.message}` : ""], ["started", when(s.started_at)], ["duration", dur(s.duration_ms)], ["execution", s.execution], ["reason", failure ? "" : s.reason], ["cached from", s.cached_from], ["reused from", s.reused_from],
        ["items", s.item_counts ? `${s.item_counts.succeeded} succeeded, ${s.item_counts.failed} failed of ${s.item_counts.count}` : ""]];
      const kids = [el("h2", {}, s.id), el("dl", {}, rows.filter((r) => r[1] !== undefined && r[1] !== "" && r[1] !== 0).flatMap(([k, v]) => [el("dt", {}, k), el("dd", {}, v)]))];
      if (s.items && s.items.length) kids.push(el("h2", {}, "Items"), el("table", {}, el("tbody", {}, s.items.map((it) =>
        el("tr", {}, el("td", {}, `${s.id}[${it.index}]`), el("td", {}, badge(it.status)), el("td", {}, it.attempts ? `${it.attempts} attempt(s)` : ""), el("td", {}, it.reason || ""))))),
        s.item_counts && s.item_counts.count > s.items.length ? el("p", { class: "muted" }, `the first ${s.items.length} of ${s.item_counts.count}; the report has them all`) : null);
      if (s.child) kids.push(el("p", {}, "child run: ", el("a", { href: "/runs/" + encodeURIComponent(s.child.workflow_id) }, s.child.workflow_id)));
      if (s.agent && s.agent.rounds && s.agent.rounds.length) kids.push(...agentRounds(s.agent));
      if (s.waiting) kids.push(ask(s));
      kids.push(el("h2", {}, "Inputs"), inputsBox(s.id));
      if (failure) kids.push(el("p", { class: "notice error", id: "failure" }, failure));
      if (next) kids.push(el("p", { class: "notice", id: "next" }, el("strong", {}, "next: "), [next.command, next.advice].filter((x) => x).join("; ")));
      if (env.message && !failure) kids.push(el("h2", {}, "Envelope"), el("p", {}, env.message));
      if (env.data !== undefined && env.data !== null) kids.push(el("h2", {}, "Data"), el("pre", {}, JSON.stringify(env.data, null, 2)));
      if (env.feedback && env.feedback.length) kids.push(el("h2", {}, "Feedback"), el("ul", { class: "timeline" }, env.feedback.map((f) => el("li", { class: f.level }, `${f.phase}: ${f.message}`))));
      if (s.artifacts && s.artifacts.length) kids.push(el("h2", {}, "Artifacts"), el("ul", {}, s.artifacts.map((a) => el("li", {},
        el("a", { href: base + "/artifacts/" + a.sha256, target: "_blank", rel: "noopener" }, a.path.split("/").pop()), ` ${a.bytes} bytes, sha256 ${a.sha256.slice(0, 12)}`))));
      if (tails[s.id]) kids.push(el("h2", {}, "stderr (latest)"), el("pre", {}, tails[s.id].join("\n")));
      if (s.decisions && s.decisions.length) kids.push(el("h2", {}, "Decisions"), el("ul", {}, s.decisions.map((d) => el("li", {}, `${d.action} by ${d.by}${d.comment ? ": " + d.comment : ""} (${when(d.at)})`))));
      box.replaceChildren(...kids);
    };
    // A group lists its members and their states; a click shows one.
    const showGroup = (box, gid) => {
      shown = "";
      const members = groups[gid] || seen[gid];
      const close = opened.has(gid) ? el("button", { on: { click: () => { opened.delete(gid); graph(); showGroup(box, gid); } } }, "Draw as one node again") : null;
      box.replaceChildren(...[el("h2", {}, `${members.length} steps`), el("p", { class: "muted" }, "interchangeable steps (same tool, same dependencies and dependents)" + (opened.has(gid) ? ", drawn one by one" : " drawn as one node: click it to draw them one by one")), close,
        el("table", {}, el("tbody", {}, members.slice(0, 500).map((m) => el("tr", {}, el("td", {}, el("a", { href: "#", on: { click: (e) => { e.preventDefault(); selected = m; showStepOf(box, m); } } }, m)),
          el("td", {}, badge(stateOf(m))))))),
        members.length > 500 ? el("p", { class: "muted" }, `the first 500 of ${members.length}; find a step by id above`) : null].filter((k) => k));
    };
    const showStepOf = (box, id) => { selected = id; showStep(); };
    // A step's evaluated inputs, read once (they do not change).
    const inputs = {};
    const inputsBox = (id) => {
      const box = el("pre", {}, inputs[id] === undefined ? "…" : inputs[id]);
      if (inputs[id] === undefined) {
        api(base + "/steps/" + encodeURIComponent(id) + "/inputs").then((v) => JSON.stringify(v, null, 2)).catch((e) => e.message)
          .then((text) => { inputs[id] = text; box.textContent = text; });
      }
      return box;
    };
    // An agent step's rounds (docs/agents.md): what each proposed, what came
    // of it, and what it cost; the model's text as text, never markup.
    function agentRounds(a) {
      const sp = a.spent || {};
      const head = `${sp.llm_calls || 0} model call(s), ${sp.tokens || 0} tokens, $${(sp.usd || 0).toFixed(4)}` + (a.breach ? ` · stopped at its budget: ${a.breach}` : "");
      const outcome = (r) => r.finished ? "finished" : (r.refused && r.refused.length) ? "refused: " + r.refused.join("; ") : r.sub_run ? el("a", { href: "/runs/" + encodeURIComponent(r.sub_run) }, "ran as " + r.sub_run) : "";
      return [el("h2", {}, "Agent rounds"), el("p", { class: "muted" }, head), el("table", {}, el("tbody", {}, a.rounds.map((r) =>
        el("tr", {}, el("td", {}, `round ${r.round}`), el("td", {}, `${r.model || ""} ${r.input_tokens || 0}/${r.output_tokens || 0}`),
          el("td", {}, (r.calls || []).join("; ") + (r.approval ? ` (gate sha256:${r.approval.slice(0, 16)})` : "") + (r.reused ? " (answer reused)" : "")), el("td", {}, outcome(r))))))];
    }

    const ask = (s) => {
      const draft = drafts[s.waiting.id] || (drafts[s.waiting.id] = { comment: "", timeout: "" });
      const comment = el("textarea", { rows: 2, placeholder: "comment (kept with the decision)", on: { input: () => { draft.comment = comment.value; } } });
      const timeout = el("input", { placeholder: "retry timeout, e.g. 10m", size: 14, on: { input: () => { draft.timeout = timeout.value; } } });
      comment.value = draft.comment; timeout.value = draft.timeout;
      const decide = (action) => act("decide", { step: s.id, action, comment: comment.value, timeout: action === "retry" ? timeout.value : "", proposal: s.waiting.proposal || "" });
      const buttons = (s.waiting.actions || []).map((a) => el("button", { class: a === "approve" ? "primary" : a === "reject" || a === "fail" ? "danger" : "", "data-action": a, on: { click: () => decide(a) } }, a));
      return el("div", { class: "ask" }, el("strong", {}, s.waiting.prompt || "waiting"), comment, (s.waiting.actions || []).includes("retry") ? timeout : null, el("div", { class: "bar" }, buttons));
    };
    graph();
    refresh();
  }

  // ---- plans ----
  async function plansPage() {
    const view = viewer($("graph"));
    const files = (await api("/api/plans")).plans;
    $("file").replaceChildren(el("option", { value: "" }, `${files.length} plan file(s)`), ...files.map((f) => el("option", { value: f }, f)));
    // A group opens on a click here too (the plan's own groups only).
    const opened = new Set();
    let shownFile = "";
    const show = async () => {
      const f = $("file").value;
      if (!f) return;
      if (f !== shownFile) { opened.clear(); shownFile = f; }
      history.replaceState(null, "", "/plans?file=" + encodeURIComponent(f));
      const q = "?file=" + encodeURIComponent(f);
      try {
        const rep = await api("/api/plans/check" + q);
        $("status").className = "badge " + rep.status; $("status").textContent = rep.status; $("message").textContent = rep.message;
        const gaps = new Set((rep.gaps || []).map((g) => g.step_id));
        const kids = [el("h2", {}, rep.plan)];
        if (rep.problems && rep.problems.length) kids.push(el("h2", {}, "Problems"), el("ul", { class: "problems" }, rep.problems.map((p) => el("li", {}, `${p.file || f}:${p.line || 0}:${p.column || 0} ${p.field || ""}: ${p.message}`))));
        if (gaps.size) kids.push(el("h2", {}, "Gaps"), el("ul", { class: "problems" }, rep.gaps.map((g) => el("li", {}, `${g.step_id}: ${g.missing_capability}: ${g.reason_message || g.reason}`))));
        kids.push(el("h2", {}, "Steps"), el("ul", {}, (rep.resolution || []).map((r) => el("li", {}, `${r.step_id} → ${r.tool ? r.tool + "@" + r.version : "none"}`))));
        $("report").replaceChildren(...kids);
        if (rep.status === "invalid") { $("graph").replaceChildren(el("p", { class: "notice error" }, "the plan is invalid: see its problems")); return; }
        view.set(await api("/api/plans/graph.svg" + q + (opened.size ? "&expand=" + encodeURIComponent([...opened].join(",")) : "")));
        $("graph").querySelectorAll("g.node").forEach((g) => {
          const gap = gaps.has(g.id.slice(5)), lines = g.querySelectorAll("text");
          if (/^(group|chain):/.test(g.id.slice(5))) g.addEventListener("click", () => { opened.add(g.id.slice(5)); show(); });
          g.setAttribute("class", "node step " + (gap ? "state-gap" : "state-ready"));
          if (gap && lines.length) { lines[lines.length - 1].classList.add("mark"); lines[lines.length - 1].textContent = "gap: no tool"; }
        });
      } catch (e) { $("graph").replaceChildren(el("p", { class: "notice error" }, e.message)); }
    };
    $("file").addEventListener("change", show);
    const want = new URLSearchParams(location.search).get("file");
    if (want) { $("file").value = want; show(); }
  }
  return { runsPage, runPage, plansPage };
})();
