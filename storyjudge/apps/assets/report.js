/* storyjudge report and UI behaviour: character graph focus, zoom and pan, evidence links.
 * Event delegation on the document, so fragments the UI inserts later behave like the report's own. */
(function () {
  "use strict";

  function box(el) { return el ? el.closest(".ckg") : null; }

  function clearFocus(root) {
    var svg = root.querySelector(".ckg-svg");
    if (svg) { svg.classList.remove("focused"); }
    root.querySelectorAll(".ckg-node, .ckg-edge").forEach(function (el) {
      el.classList.remove("hl", "selected");
    });
    root.querySelectorAll(".ckg-detail").forEach(function (d) { d.hidden = true; });
    var hint = root.querySelector(".ckg-hint");
    if (hint) { hint.hidden = false; }
  }

  function focusNode(root, key) {
    clearFocus(root);
    var keep = {};
    keep[key] = true;
    root.querySelectorAll(".ckg-edge").forEach(function (edge) {
      if (edge.getAttribute("data-source") === key || edge.getAttribute("data-target") === key) {
        edge.classList.add("hl");
        keep[edge.getAttribute("data-source")] = true;
        keep[edge.getAttribute("data-target")] = true;
      }
    });
    root.querySelectorAll(".ckg-node").forEach(function (node) {
      var k = node.getAttribute("data-node");
      if (keep[k]) { node.classList.add("hl"); }
      if (k === key) { node.classList.add("selected"); }
    });
    root.querySelectorAll(".ckg-detail").forEach(function (d) {
      d.hidden = d.getAttribute("data-node") !== key;
    });
    var hint = root.querySelector(".ckg-hint");
    if (hint) { hint.hidden = true; }
    var svg = root.querySelector(".ckg-svg");
    if (svg) { svg.classList.add("focused"); }
  }

  function viewBox(svg) { return svg.getAttribute("viewBox").split(/\s+/).map(Number); }

  function zoom(svg, factor, cx, cy) {
    var vb = viewBox(svg);
    if (cx === undefined) { cx = vb[0] + vb[2] / 2; cy = vb[1] + vb[3] / 2; }
    var w = vb[2] / factor, h = vb[3] / factor;
    var x = cx - (cx - vb[0]) / factor, y = cy - (cy - vb[1]) / factor;
    svg.setAttribute("viewBox", [x, y, w, h].map(function (v) { return v.toFixed(1); }).join(" "));
  }

  function svgPoint(svg, clientX, clientY) {
    var rect = svg.getBoundingClientRect(), vb = viewBox(svg);
    return [vb[0] + (clientX - rect.left) / rect.width * vb[2], vb[1] + (clientY - rect.top) / rect.height * vb[3]];
  }

  var drag = null;
  var dragged = false;

  document.addEventListener("click", function (ev) {
    var target = ev.target;
    var pick = target.closest("[data-node]");
    if (pick && box(pick) && (pick.classList.contains("ckg-node") || pick.classList.contains("ckg-pick"))) {
      if (!dragged) { focusNode(box(pick), pick.getAttribute("data-node")); }
      return;
    }
    var zoomButton = target.closest(".ckg-zoom");
    if (zoomButton) {
      var svg = box(zoomButton).querySelector(".ckg-svg");
      var how = zoomButton.getAttribute("data-zoom");
      if (how === "reset") { svg.setAttribute("viewBox", svg.getAttribute("data-viewbox")); }
      else { zoom(svg, parseFloat(how)); }
      return;
    }
    var link = target.closest("a.ev-link");
    if (link) {
      var passage = document.getElementById(link.getAttribute("href").slice(1));
      if (passage) { passage.open = true; }
      return;
    }
    var sentence = target.closest(".sent[data-sentence]");
    if (sentence) {
      var article = sentence.closest(".iteration");
      if (!article) { return; }
      var rows = article.querySelectorAll('tr.fact[data-sentence="' + sentence.getAttribute("data-sentence") + '"]');
      article.querySelectorAll("tr.fact.target").forEach(function (r) { r.classList.remove("target"); });
      if (rows.length) {
        var details = article.querySelector("details.facts");
        if (details) { details.open = true; }
        rows.forEach(function (r) { r.classList.add("target"); });
        rows[0].scrollIntoView({ behavior: "smooth", block: "center" });
      }
      return;
    }
    var background = target.closest(".ckg-svg");
    if (background && !dragged) { clearFocus(box(background)); }
  });

  document.addEventListener("keydown", function (ev) {
    var node = ev.target.closest ? ev.target.closest(".ckg-node") : null;
    if (node && (ev.key === "Enter" || ev.key === " ")) {
      ev.preventDefault();
      focusNode(box(node), node.getAttribute("data-node"));
    }
  });

  document.addEventListener("wheel", function (ev) {
    var svg = ev.target.closest ? ev.target.closest(".ckg-svg") : null;
    if (!svg) { return; }
    ev.preventDefault();
    var p = svgPoint(svg, ev.clientX, ev.clientY);
    zoom(svg, ev.deltaY < 0 ? 1.15 : 1 / 1.15, p[0], p[1]);
  }, { passive: false });

  document.addEventListener("pointerdown", function (ev) {
    var svg = ev.target.closest ? ev.target.closest(".ckg-svg") : null;
    if (!svg || ev.button !== 0) { return; }
    drag = { svg: svg, x: ev.clientX, y: ev.clientY, vb: viewBox(svg) };
    dragged = false;
  });

  document.addEventListener("pointermove", function (ev) {
    if (!drag) { return; }
    var dx = ev.clientX - drag.x, dy = ev.clientY - drag.y;
    if (!dragged && Math.abs(dx) + Math.abs(dy) < 4) { return; }
    dragged = true;
    drag.svg.classList.add("dragging");
    var rect = drag.svg.getBoundingClientRect();
    var vb = drag.vb;
    var x = vb[0] - dx / rect.width * vb[2], y = vb[1] - dy / rect.height * vb[3];
    drag.svg.setAttribute("viewBox", [x, y, vb[2], vb[3]].map(function (v) { return v.toFixed(1); }).join(" "));
  });

  document.addEventListener("pointerup", function () {
    if (drag) { drag.svg.classList.remove("dragging"); }
    drag = null;
    setTimeout(function () { dragged = false; }, 0);
  });
})();
