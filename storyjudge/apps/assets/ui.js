/* The demo page: opens a run, starts the four steps, polls their progress, shows what each produced.
 * Narrative text is only ever set with textContent; the graph and iteration panels are HTML fragments that the
 * server renders with the report's autoescaping templates. */
(function () {
  "use strict";

  var STEP_NAMES = {
    graph: "Generating the knowledge graph",
    summary: "Generating the initial summary",
    score: "Computing the factuality score",
    refine: "Refining the summary"
  };
  var current = null;      // the run's view, as the server last sent it
  var pollTimer = null;
  var collapsedFor = null; // the run whose narrative was folded away once its graph was built

  function $(id) { return document.getElementById(id); }

  function api(method, url, body) {
    var options = { method: method, headers: {} };
    if (body !== undefined) {
      options.headers["Content-Type"] = "application/json";
      options.body = JSON.stringify(body);
    }
    return fetch(url, options).then(function (res) {
      return res.json().catch(function () { return { error: res.statusText }; }).then(function (data) {
        if (!res.ok) { throw new Error(data.error || res.statusText); }
        return data;
      });
    });
  }

  function showError(message) {
    var box = $("error");
    box.textContent = message || "";
    box.hidden = !message;
  }

  function settings() {
    return {
      model: $("model").value.trim(),
      base_url: $("base-url").value.trim(),
      ckg_samples: $("ckg-samples").value
    };
  }

  function signed(delta) { return (delta >= 0 ? "+" : "") + delta.toFixed(3); }

  function renderScenes(view) {
    var box = $("scenes");
    box.textContent = "";
    $("scene-count").textContent = "(" + view.scenes.length + " scenes, " + (view.segmentation || "?") + ")";
    view.scenes.forEach(function (scene) {
      var details = document.createElement("details");
      details.className = "scene";
      details.setAttribute("data-scene", scene.id);
      var summary = document.createElement("summary");
      summary.textContent = scene.id + (scene.title ? " \u00b7 " + scene.title : "");
      var pre = document.createElement("pre");
      pre.textContent = scene.text;
      details.appendChild(summary);
      details.appendChild(pre);
      box.appendChild(details);
    });
  }

  function renderModels(view) {
    var list = $("models");
    list.textContent = "";
    var order = [];
    var roles = {};
    view.models.forEach(function (m) {
      var key = m.spec + " (" + m.note + ")";
      if (!roles[key]) { roles[key] = []; order.push(key); }
      roles[key].push(m.role);
    });
    order.forEach(function (key) {
      var li = document.createElement("li");
      var b = document.createElement("b");
      b.textContent = (order.length === 1 ? "all roles" : roles[key].join(", ")) + ": ";
      li.appendChild(b);
      li.appendChild(document.createTextNode(key));
      list.appendChild(li);
    });
  }

  function foldState(row) {  // which sections of each round a person opened or closed, by round and position
    var state = {};
    row.querySelectorAll(".iteration").forEach(function (card) {
      card.querySelectorAll("details").forEach(function (d, n) { state[card.id + "|" + n] = d.open; });
    });
    return state;
  }

  function renderIterations(view) {
    var row = $("iterations");
    var folds = foldState(row);  // a re-render (a correction saved, a step done) keeps them as they were
    row.textContent = "";
    view.iterations.slice().reverse().forEach(function (it) {  // the newest round first
      var slot = document.createElement("div");
      slot.className = "iteration-slot";
      slot.innerHTML = it.html;  // rendered and escaped by the server
      row.appendChild(slot);
      slot.querySelectorAll("tr.fact").forEach(function (fact) { addCorrection(view, it.iteration, fact); });
      slot.querySelectorAll(".iteration").forEach(function (card) {
        card.querySelectorAll("details").forEach(function (d, n) {
          var kept = folds[card.id + "|" + n];
          if (kept !== undefined) { d.open = kept; }
        });
      });
    });
    var line = $("score-line");
    if (!view.iterations.length) {
      line.textContent = "Not scored yet: press \u201cCompute factuality score\u201d.";
      return;
    }
    var parts = view.iterations.map(function (it) {
      var shown = it.headline;  // worded by the server (score or why it does not count, coverage)
      if (it.reliable !== false && it.interval) { shown += " " + it.interval; }
      var corrected = it.corrections ? " with " + it.corrections + " correction" + (it.corrections === 1 ? "" : "s") : "";
      return "round " + it.iteration + ": " + shown + corrected;
    });
    var last = view.iterations[view.iterations.length - 1];
    var text = "NarrativeFactScore \u2014 " + parts.join(", ");
    if (last.delta !== null && last.delta !== undefined) { text += " (change " + signed(last.delta) + ")"; }
    if (view.best_iteration !== null) { text += "; best: round " + view.best_iteration; }
    line.textContent = text;
    if (last.accepted === false) {
      line.textContent += ". Round " + last.iteration + " was not accepted (" + last.note + ")" +
        (view.refinable ? "; the next refinement revises the best summary again." : ".");
    } else if (last.unsupported === 0) {
      line.textContent += last.score === null
        ? ". Nothing could be judged (see the facts' errors), so there is nothing to refine."
        : ". No unsupported facts left: nothing to refine.";
    }
    // why the loop stopped is the headline's, above: said once
  }

  function addCorrection(view, iteration, fact) {
    // a person marks the judge's verdict wrong, with a reason; the server recomputes the score
    var cell = fact.children[2];
    var id = fact.querySelector("td.fid");
    if (!cell || !id) { return; }
    var status = fact.classList.contains("supported") ? "supported" : (fact.classList.contains("unsupported") ? "unsupported" : "unjudged");
    var open = document.createElement("button");
    open.type = "button";
    open.className = "correct-open";
    open.textContent = "mark wrong";
    cell.appendChild(open);
    open.addEventListener("click", function () {
      open.hidden = true;
      var form = document.createElement("div");
      form.className = "correct-form";
      var verdict = document.createElement("select");
      ["supported", "unsupported"].forEach(function (v) {
        var option = document.createElement("option");
        option.value = v;
        option.textContent = v;
        option.selected = v !== status;
        verdict.appendChild(option);
      });
      // a textarea wraps its placeholder in a narrow cell (an input cut it off); the server keeps 2,000 characters
      var reason = document.createElement("textarea");
      reason.rows = 3;
      reason.maxLength = 2000;
      reason.placeholder = "why the verdict is wrong";
      var save = document.createElement("button");
      save.type = "button";
      save.className = "correct-save";
      save.textContent = "save";
      form.appendChild(verdict);
      form.appendChild(reason);
      form.appendChild(save);
      cell.appendChild(form);
      save.addEventListener("click", function () {
        api("POST", "/api/runs/" + encodeURIComponent(view.name) + "/corrections", {
          iteration: iteration, fact_id: id.textContent.trim(), verdict: verdict.value, reason: reason.value
        }).then(render).catch(function (err) { showError(err.message); });
      });
    });
  }

  function renderButtons(view) {
    var running = view.job && view.job.status === "running";
    var has = {
      graph: !!view.ckg,
      summary: !!view.summary,
      score: view.iterations.length > 0,
      refine: view.iterations.length > 1
    };
    var last = view.iterations[view.iterations.length - 1];
    var allowed = {
      graph: true,
      summary: true,
      score: !!view.summary,
      refine: !!last && !!view.refinable
    };
    document.querySelectorAll("button.step").forEach(function (button) {
      var step = button.getAttribute("data-step");
      button.disabled = running || !allowed[step];
      button.classList.toggle("done", has[step]);
      button.classList.toggle("running", running && view.job.step === step);
    });
    $("open-narrative").disabled = !!running;
    $("btn-own-summary").disabled = !!running;
  }

  function render(view) {
    current = view;
    $("welcome").hidden = true;
    $("run").hidden = false;
    $("run-title").textContent = view.title;
    $("run-meta").textContent = view.source + " \u00b7 " + view.scenes.length + " scenes (" + view.segmentation + ")";
    $("model").value = view.settings.model || "";
    $("base-url").value = view.settings.base_url || "";
    if (view.settings.ckg_samples) { $("ckg-samples").value = view.settings.ckg_samples; }
    renderModels(view);
    renderScenes(view);
    if (view.ckg && collapsedFor !== view.name) {  // after the first step the graph, not the text, is in view
      $("narrative").open = false;
      collapsedFor = view.name;
    } else if (!view.ckg) {
      $("narrative").open = true;
      collapsedFor = null;
    }
    renderEmbedded(view);
    if (view.ckg) {
      $("ckg").innerHTML = view.ckg.html;  // rendered and escaped by the server
    } else {
      $("ckg").innerHTML = "<p class=\"empty\">Not built yet: press <b>Generate knowledge graph</b>.</p>";
    }
    $("headline").innerHTML = view.headline || "";  // rendered and escaped by the server
    var summary = $("summary");
    if (view.summary && view.iterations.length) {  // shown once: highlighted, as round 0, below
      summary.innerHTML = "<span class=\"meta\">Scored below as round 0, with its unsupported sentences marked.</span>";
    } else if (view.summary) {
      summary.textContent = view.summary.text;
    } else {
      summary.innerHTML = "<span class=\"empty\">Not generated yet: press <b>Generate initial summary</b>, " +
        "or use a summary of your own.</span>";
    }
    $("summary-given").hidden = !(view.summary && view.summary.given);
    renderIterations(view);
    renderRuns(view);
    var u = view.usage;
    $("usage-card").hidden = false;
    $("usage").textContent = u.calls + " LLM calls (" + u.cache_hits + " cache hits, " + u.failures + " failures), " +
      u.input_tokens.toLocaleString() + " tokens in / " + u.output_tokens.toLocaleString() + " out, est. " + u.cost;
    $("run-dir").textContent = view.name;
    var link = $("report-link");
    link.hidden = !view.report;
    link.href = "/runs/" + encodeURIComponent(view.name) + "/report.html";
    var base = "/runs/" + encodeURIComponent(view.name) + "/download/";
    var files = { "dl-summary": ["summary.txt", !!view.summary], "dl-result": ["result.json", !!view.result],
      "dl-report": ["report.html", !!view.report] };
    Object.keys(files).forEach(function (id) {
      $(id).href = base + files[id][0];
      $(id).hidden = !files[id][1];
    });
    $("downloads").hidden = !view.summary && !view.report;
    renderButtons(view);
    renderJob(view.job);
    if (view.job && view.job.status === "running") { poll(); }
  }

  function cell(row, text) {
    var td = document.createElement("td");
    td.textContent = text;
    row.appendChild(td);
    return td;
  }

  function renderRuns(view) {
    var body = $("runs-body");
    while (body.firstChild) { body.removeChild(body.firstChild); }
    var runs = view.runs || [];
    $("runs").hidden = runs.length === 0;
    $("runs-empty").hidden = runs.length > 0;
    $("btn-compare").hidden = runs.length === 0;
    $("compare-hint").hidden = runs.length === 0;
    runs.forEach(function (r) {
      var row = document.createElement("tr");
      row.className = r.id === view.run_id ? "current" : "";
      var picks = cell(row, "");
      var choices = [];
      if (r.rounds > 1) {  // each round of a refinement, then the run's best
        for (var n = 0; n < r.rounds; n++) { choices.push([r.id + "#" + n, "round " + n]); }
      }
      choices.push([r.id, "best"]);
      choices.forEach(function (choice) {
        var label = document.createElement("label");
        var box = document.createElement("input");
        box.type = "checkbox";
        box.className = "compare-pick";
        box.value = choice[0];
        label.appendChild(box);
        label.appendChild(document.createTextNode(" " + choice[1]));
        picks.appendChild(label);
      });
      var run = cell(row, (r.created || "").replace("T", " ").replace("Z", ""));
      var id = document.createElement("small");
      id.className = "meta run-id";
      id.textContent = r.id;
      run.appendChild(document.createElement("br"));
      run.appendChild(id);
      cell(row, r.summary_source === "given" ? "your own" : (r.summary_source || "-"));
      cell(row, String(r.rounds));
      cell(row, r.nfs_text);
      cell(row, r.coverage === null || r.coverage === undefined ? "-" : Math.round(r.coverage * 100) + "%");
      cell(row, String(r.words));
      cell(row, (r.summarizer || "-") + " / " + (r.judge || "-"));
      var open = document.createElement("a");
      open.href = "/runs/" + encodeURIComponent(view.name) + "/runs/" + encodeURIComponent(r.id) + "/report.html";
      open.target = "_blank";
      open.rel = "noopener";
      open.textContent = "open";
      cell(row, "").appendChild(open);
      body.appendChild(row);
    });
  }

  function compareSelected() {
    var picked = [];  // the oldest run first: the others are set against it
    Array.prototype.slice.call(document.querySelectorAll("#runs-body tr")).reverse().forEach(function (row) {
      row.querySelectorAll("input.compare-pick").forEach(function (box) {
        if (box.checked) { picked.push("runs=" + encodeURIComponent(box.value)); }
      });
    });
    if (picked.length < 2) { showError("Tick two or more runs to compare."); return; }
    window.open("/runs/" + encodeURIComponent(current.name) + "/compare.html?" + picked.join("&"), "_blank", "noopener");
  }

  function renderEmbedded(view) {
    var banner = $("embedded-banner");
    var roles = view.embedded_roles || [];
    banner.hidden = !roles.length;
    if (!roles.length) { return; }
    banner.textContent = "";
    banner.appendChild(document.createTextNode(
      "The embedded SmolLM2-135M model plays " +
      (roles.length === view.models.length ? "every role" : roles.join(", ")) + ": its judgements are demo grade. "));
    var more = document.createElement("span");
    more.textContent = "For real scores enter another Model spec (openai:gpt-4o-mini with OPENAI_API_KEY set " +
      "before starting the UI, or a local server's model with its Base URL).";
    banner.appendChild(more);
  }

  function renderJob(job) {
    var box = $("progress");
    if (!job) { box.hidden = true; return; }
    box.hidden = job.status !== "running";
    if (job.status === "error" || job.status === "interrupted") { showError(job.error); }
    $("progress-step").textContent = (STEP_NAMES[job.step] || job.step) + "\u2026";
    $("progress-time").textContent = (job.elapsed || 0) + " s";
    var stage = job.stages && job.stages[job.current];
    var bar = $("progress-bar");
    if (stage && stage.total) {
      $("progress-stage").textContent = job.current + " " + stage.done + "/" + stage.total +
        (stage.message ? " \u2014 " + stage.message : "");
      bar.max = stage.total;
      bar.value = Math.min(stage.done, stage.total);
    } else {
      $("progress-stage").textContent = job.current ? job.current : "starting";
      bar.removeAttribute("value");  // indeterminate
    }
    var names = Object.keys(job.stages || {});
    $("progress-stages").textContent = names.map(function (name) {
      var s = job.stages[name];
      return name + " " + s.done + (s.total ? "/" + s.total : "");
    }).join(" \u00b7 ");
  }

  function poll() {
    if (pollTimer || !current) { return; }
    var name = current.name;
    pollTimer = setInterval(function () {
      api("GET", "/api/runs/" + encodeURIComponent(name) + "/job").then(function (data) {
        renderJob(data.job);
        if (!data.job || data.job.status !== "running") {
          clearInterval(pollTimer);
          pollTimer = null;
          openRun(name);
        }
      }).catch(function (err) { showError(err.message); });
    }, 500);
  }

  function openRun(name) {
    return api("GET", "/api/runs/" + encodeURIComponent(name)).then(function (view) {
      if (location.hash !== "#run=" + name) { history.replaceState(null, "", "#run=" + name); }
      render(view);
    }).catch(function (err) { showError(err.message); });
  }

  function loadRecent() {
    return api("GET", "/api/runs").then(function (runs) {
      var select = $("recent");
      while (select.options.length > 1) { select.remove(1); }
      runs.forEach(function (r) {
        var option = document.createElement("option");
        option.value = r.name;
        option.textContent = r.title + " \u2014 " + r.runs + " run(s), " + r.iterations + " round(s) \u00b7 " + r.name;
        select.appendChild(option);
      });
    }).catch(function () { /* the list is a convenience */ });
  }

  function openNarrative() {
    showError("");
    var body = { settings: settings() };
    var own = $("own-body").value.trim();
    if ($("own-text").open && own) {
      body.text = $("own-body").value;
      body.title = $("own-title").value.trim();
    } else {
      body.example = $("example").value;
    }
    $("open-narrative").disabled = true;
    api("POST", "/api/runs", body).then(function (view) {
      history.replaceState(null, "", "#run=" + view.name);
      render(view);
      loadRecent();
    }).catch(function (err) {
      showError(err.message);
    }).then(function () {
      $("open-narrative").disabled = !!(current && current.job && current.job.status === "running");
    });
  }

  function runStep(step, ownSummary) {
    if (!current) { return; }
    showError("");
    var body = { settings: settings() };
    if (ownSummary) { body.summary = ownSummary; }
    api("POST", "/api/runs/" + encodeURIComponent(current.name) + "/steps/" + step, body)
      .then(function (data) {
        current.job = data.job;
        renderButtons(current);
        renderJob(data.job);
        poll();
      })
      .catch(function (err) { showError(err.message); });
  }

  $("open-narrative").addEventListener("click", openNarrative);
  $("recent").addEventListener("change", function (ev) {
    if (ev.target.value) { showError(""); openRun(ev.target.value); }
  });
  $("own-file").addEventListener("change", function (ev) {
    var file = ev.target.files && ev.target.files[0];
    if (!file) { return; }
    var reader = new FileReader();
    reader.onload = function () {
      $("own-body").value = String(reader.result || "");
      if (!$("own-title").value) { $("own-title").value = file.name.replace(/\.[^.]+$/, ""); }
    };
    reader.readAsText(file);
  });
  $("own-summary-file").addEventListener("change", function (ev) {
    var file = ev.target.files && ev.target.files[0];
    if (!file) { return; }
    var reader = new FileReader();
    reader.onload = function () { $("own-summary-text").value = String(reader.result || ""); };
    reader.readAsText(file);
  });
  $("btn-compare").addEventListener("click", compareSelected);
  $("headline").addEventListener("click", function (ev) {  // the page's own hash names the run: scroll instead
    var link = ev.target.closest("a[href^='#']");
    var panel = link && document.getElementById(link.getAttribute("href").slice(1));
    if (panel) { ev.preventDefault(); panel.scrollIntoView({ behavior: "smooth", block: "start" }); }
  });
  $("btn-own-summary").addEventListener("click", function () {
    var text = $("own-summary-text").value.trim();
    if (!text) { showError("Paste or upload your summary first (the Summary box is empty)."); return; }
    runStep("summary", text);
  });
  document.querySelectorAll("button.step").forEach(function (button) {
    button.addEventListener("click", function () { runStep(button.getAttribute("data-step")); });
  });

  loadRecent();
  var match = /^#run=([a-z0-9-]+)$/.exec(location.hash);
  if (match) { openRun(match[1]); }
})();
