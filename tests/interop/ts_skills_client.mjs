// Read a server's skills with the TypeScript SDK 2.4's skills client (ext/skills).
//
//     node ts_skills_client.mjs COMMAND [ARG...]
//
// Spawns the server over stdio, lists its skills, reads each skill's SKILL.md and every file
// its entry lists through SkillsClient.read (which checks each against the entry: listed,
// size, digest, and the frontmatter), and prints one JSON object with what it saw: the
// capability, the entries, and per file either its verified text or the refusal's reason.
import { Client } from "@modelcontextprotocol/client";
import { SkillsClient, SkillVerificationError } from "@modelcontextprotocol/client/ext/skills";
import { StdioClientTransport } from "@modelcontextprotocol/client/stdio";

const [command, ...args] = process.argv.slice(2);
if (!command) {
  process.stderr.write("usage: node ts_skills_client.mjs COMMAND [ARG...]\n");
  process.exit(2);
}

const client = new Client({ name: "ts-skills-client", version: "0.0.0" });
await client.connect(new StdioClientTransport({ command, args, env: { ...process.env }, stderr: "inherit" }));
const skills = new SkillsClient(client);
const out = { supported: skills.supported, directoryRead: skills.directoryRead };
const listing = await skills.list();
out.skills = listing.skills;
out.invalid = listing.invalid;
out.reads = {};
for (const skill of listing.skills) {
  const refs = Array.isArray(skill.resources) ? skill.resources.map((r) => r.uri) : [skill.uri];
  // SKILL.md first: a host reads nothing else of a skill whose SKILL.md fails.
  for (const uri of [skill.uri, ...refs.filter((u) => u !== skill.uri)]) {
    try {
      const file = await skills.read(skill, uri);
      out.reads[uri] = { verified: file.verified, size: file.bytes.length, text: file.text ?? null };
    } catch (error) {
      if (!(error instanceof SkillVerificationError)) throw error;
      out.reads[uri] = { refused: error.reason, message: error.message };
      break;
    }
  }
}
if (skills.directoryRead && listing.skills.length) {
  const root = listing.skills[0].uri.slice(0, -"/SKILL.md".length);
  out.directory = (await skills.readDirectory(root)).resources;
}
process.stdout.write(JSON.stringify(out) + "\n");
await client.close();
