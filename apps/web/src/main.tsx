import '@mantine/core/styles.css';
import '@mantine/notifications/styles.css';
import './app/console.css';
import { createTheme, MantineProvider } from '@mantine/core';
import { Notifications } from '@mantine/notifications';
import { QueryClientProvider } from '@tanstack/react-query';
import { StrictMode } from 'react';
import { createRoot } from 'react-dom/client';
import { RouterProvider } from 'react-router';
import { queryClient } from './app/query';
import { router } from './app/router';

// the darker shade: white text on the default shade misses WCAG AA contrast (axe-core color-contrast)
const theme = createTheme({ primaryShade: 8 });

const styleNonce = (): string => document.querySelector<HTMLMetaElement>('meta[name="csp-nonce"]')?.content ?? '';

createRoot(document.getElementById('root')!).render(
  <StrictMode>
    {/* the default theme's variables are in styles.css and the global classes in console.css; the
        <style> elements of responsive layouts carry the nonce the server gave this page */}
    <MantineProvider theme={theme} withGlobalClasses={false} defaultColorScheme="light" getStyleNonce={styleNonce}>
      <Notifications position="top-right" />
      <QueryClientProvider client={queryClient}>
        <RouterProvider router={router} />
      </QueryClientProvider>
    </MantineProvider>
  </StrictMode>,
);
