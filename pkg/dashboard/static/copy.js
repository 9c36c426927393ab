// Copy buttons: <button data-copy="input-id"> copies that input's value.
document.addEventListener("click", function (e) {
  var b = e.target.closest("[data-copy]");
  if (!b) return;
  var input = document.getElementById(b.getAttribute("data-copy"));
  if (!input) return;
  input.select();
  var done = function () { b.textContent = "Copied"; setTimeout(function () { b.textContent = "Copy"; }, 1500); };
  if (navigator.clipboard) navigator.clipboard.writeText(input.value).then(done);
  else if (document.execCommand("copy")) done();
});
