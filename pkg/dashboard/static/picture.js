// Flow picture: a step's box opens its panel below the picture, in place
// (closing the others); a link to #step-N opens it too. Without script the
// box is an ordinary link to the panel.
(function () {
  function open(id, scroll) {
    var d = id && document.getElementById(id);
    if (!d || d.tagName !== "DETAILS") return false;
    document.querySelectorAll(".step-panels details[open]").forEach(function (o) { if (o !== d) o.open = false; });
    d.open = true;
    if (scroll) d.scrollIntoView({block: "nearest"});
    return true;
  }
  document.addEventListener("click", function (e) {
    var a = e.target.closest && e.target.closest(".flow-picture a");
    if (!a) return;
    var id = (a.getAttribute("href") || "").replace(/^#/, "");
    if (open(id, true)) {
      e.preventDefault();
      history.replaceState(null, "", "#" + id);
    }
  });
  window.addEventListener("DOMContentLoaded", function () { open(location.hash.slice(1), true); });
})();
