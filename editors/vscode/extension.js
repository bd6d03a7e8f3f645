// Starts `vxc lsp` for .vx files. The grammar in syntaxes/ highlights without it.
const vscode = require("vscode");
const { LanguageClient } = require("vscode-languageclient/node");

let client;

function activate(context) {
  const config = vscode.workspace.getConfiguration("vx");
  const [command, ...args] = config.get("server.command", ["vxc", "lsp"]);
  client = new LanguageClient(
    "vx",
    "Vx (vxc lsp)",
    { command, args },
    {
      documentSelector: [{ language: "vx" }],
      initializationOptions: { target: config.get("target", "cpu") },
      synchronize: { configurationSection: "vx" },
    }
  );
  context.subscriptions.push(client);
  return client.start();
}

function deactivate() {
  return client ? client.stop() : undefined;
}

module.exports = { activate, deactivate };
