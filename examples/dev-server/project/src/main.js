// Rendered by the browser: proof that the page's JavaScript was served through the preview URL.
const app = document.querySelector('#app')
app.textContent = `Hello from Vite in a Hutch sandbox (${navigator.userAgent.includes('Headless') ? 'headless' : 'browser'})`
app.dataset.rendered = 'yes'
