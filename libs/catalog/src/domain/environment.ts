/**
 * Environment variables that make a dynamic loader or an interpreter run code
 * they name. Set on a program that starts outside a sandbox (bwrap itself is
 * one), they run that code on the host: a catalog entry, a pool instance or a
 * sandbox never carries them. The list follows glibc's unsecure-envvars
 * (what it drops for setuid programs) and the usual interpreter hooks.
 */
const LOADER_PREFIXES = ['LD_', 'DYLD_', 'BASH_FUNC_'];
const LOADER = new Set([
  'GCONV_PATH',
  'GETCONF_DIR',
  'HOSTALIASES',
  'LOCALDOMAIN',
  'LOCPATH',
  'MALLOC_TRACE',
  'NIS_PATH',
  'NLSPATH',
  'RESOLV_HOST_CONF',
  'RES_OPTIONS',
  'TZDIR',
]);
const INTERPRETER = new Set([
  'NODE_OPTIONS',
  'NODE_PATH',
  'NODE_REPL_EXTERNAL_MODULE',
  'PYTHONPATH',
  'PYTHONHOME',
  'PYTHONSTARTUP',
  'PYTHONEXECUTABLE',
  'PYTHONUSERBASE',
  'PYTHONWARNINGS',
  'PERL5OPT',
  'PERL5LIB',
  'PERLLIB',
  'PERL5DB',
  'RUBYOPT',
  'RUBYLIB',
  'BASH_ENV',
  'ENV',
  'SHELLOPTS',
  'BASHOPTS',
  'PS4',
  'PROMPT_COMMAND',
  'JAVA_TOOL_OPTIONS',
  '_JAVA_OPTIONS',
  'JDK_JAVA_OPTIONS',
  'CLASSPATH',
]);

/** Why a variable may not be set for a server we start, or null when it may. */
export function injectionRisk(name: string): string | null {
  const upper = name.toUpperCase();
  if (LOADER.has(upper) || LOADER_PREFIXES.some((prefix) => upper.startsWith(prefix))) {
    return `${name} is not allowed: it makes the dynamic loader load code it names`;
  }
  if (INTERPRETER.has(upper)) return `${name} is not allowed: it makes an interpreter run code it names`;
  return null;
}

/** The names among `env` that may not be set, each with why. */
export function forbiddenVariables(env: Record<string, string> | undefined): { name: string; reason: string }[] {
  return Object.keys(env ?? {}).flatMap((name) => {
    const reason = injectionRisk(name);
    return reason ? [{ name, reason }] : [];
  });
}
