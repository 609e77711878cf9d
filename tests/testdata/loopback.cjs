// Preloaded into npm peers the tests run as HTTP servers (node -r loopback.cjs):
// a server that asks for a port alone would listen on every interface, and the
// tests' servers listen on 127.0.0.1 only.
const net = require("net");

const listen = net.Server.prototype.listen;
net.Server.prototype.listen = function (...args) {
  const first = args[0];
  if (typeof first === "number" || (typeof first === "string" && /^\d+$/.test(first))) {
    if (typeof args[1] === "string") {
      args[1] = "127.0.0.1";
    } else {
      args.splice(1, 0, "127.0.0.1");
    }
  } else if (first && typeof first === "object" && "port" in first) {
    args[0] = { ...first, host: "127.0.0.1" };
  }
  return listen.apply(this, args);
};
