export * from './domain-error';
export * from './problem';
