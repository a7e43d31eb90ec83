// Starts Swagger UI on the server's own OpenAPI document. Kept out of
// index.html so the page's CSP needs no inline scripts.
window.addEventListener("load", function () {
  var el = document.getElementById("swagger-ui");
  window.ui = SwaggerUIBundle({
    url: el.dataset.url,
    dom_id: "#swagger-ui",
    deepLinking: true,
    validatorUrl: null, // the default validator is an online service
  });
});
