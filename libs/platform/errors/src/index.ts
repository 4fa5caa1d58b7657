export * from './domain-error';
export * from './problem';
export * from './error-codes';
export * from './field-issues';
export * from './tool-error';
