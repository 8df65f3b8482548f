'use strict';
// A bloom-server for the tests: the real binary ($BLOOM_SERVER_BIN) on 127.0.0.1:0 with a
// fresh temp data dir; its log is printed when a test using it fails.

const { spawn, execFileSync } = require('child_process');
const crypto = require('crypto');
const fs = require('fs');
const os = require('os');
const path = require('path');

async function startServer(t, ...args) {
  return startServerOn(t, '127.0.0.1:0', ...args);
}

// On `listen` ('127.0.0.1:PORT'): a pod that advertises its address.
async function startServerOn(t, listen, ...args) {
  const binary = process.env.BLOOM_SERVER_BIN;
  if (!binary) throw new Error('BLOOM_SERVER_BIN must name the bloom-server binary');
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'bloom-node-'));
  const portFile = path.join(dir, 'port');
  const log = fs.openSync(path.join(dir, 'log'), 'w');
  const server = {
    dir,
    child: null,
    kill() {
      const { child } = this;
      if (child && child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    },
    // Starts the binary on `listen` and waits for its port file.
    async start(listen) {
      fs.rmSync(portFile, { force: true });
      this.child = spawn(binary, [`--listen=${listen}`, `--data_dir=${dir}/data`,
        `--port_file=${portFile}`, ...args], { stdio: ['ignore', log, log] });
      const deadline = Date.now() + 30_000;
      for (;;) {
        if (fs.existsSync(portFile)) {
          const port = fs.readFileSync(portFile, 'utf8').split('\n')[0].trim();
          if (port) {
            this.target = `127.0.0.1:${port}`;
            return;
          }
        }
        if (this.child.exitCode !== null || Date.now() > deadline) {
          throw new Error(`bloom-server did not start:\n${fs.readFileSync(path.join(dir, 'log'))}`);
        }
        await new Promise((resolve) => setTimeout(resolve, 10));
      }
    },
    // After kill(): the same port and data dir.
    async restart() {
      if (this.child.exitCode === null && this.child.signalCode === null) {
        await new Promise((resolve) => this.child.once('exit', resolve));
      }
      await this.start(this.target);
    },
  };
  t.after(() => {
    server.kill();
    fs.closeSync(log);
    fs.rmSync(dir, { recursive: true, force: true });
  });
  await server.start(listen);
  return server;
}

/** A token file giving `token` the write role and `${token}-r` the read role. */
function tokenFile(dir, token) {
  const line = (secret, role) =>
    `${crypto.createHash('sha256').update(secret).digest('hex')} ${role} node-test-${role}\n`;
  const file = path.join(dir, 'tokens');
  fs.writeFileSync(file, line(token, 'write') + line(`${token}-r`, 'read'), { mode: 0o600 });
  return file;
}

/** A self-signed certificate for 127.0.0.1 (openssl): { certFile, keyFile, cert }. */
function selfSigned(dir) {
  const certFile = path.join(dir, 'cert.pem');
  const keyFile = path.join(dir, 'key.pem');
  execFileSync('openssl', ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256',
    '-nodes', '-keyout', keyFile, '-out', certFile, '-days', '1', '-subj', '/CN=bloom-node-test',
    '-addext', 'subjectAltName=IP:127.0.0.1,DNS:localhost'], { stdio: 'ignore' });
  return { certFile, keyFile, cert: fs.readFileSync(certFile) };
}

module.exports = { startServer, tokenFile, selfSigned, startServerOn };
